package test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/proxy"
)

// protoRecorder counts the calls per provider protocol it sees pass.
type protoRecorder struct {
	mu     *sync.Mutex
	protos map[string]int
}

func (r protoRecorder) Invoke(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
	r.mu.Lock()
	r.protos[next.URL().Protocol]++
	r.mu.Unlock()
	return next.Invoke(ctx, inv)
}

// TestOneServiceOnDubboAndTriple: one service exported on dubbo and tri at
// once; the registry lists both; a consumer picks one by `protocol`, and
// one that names none takes both.
func TestOneServiceOnDubboAndTriple(t *testing.T) {
	reg := "embedded://" + t.TempDir() + "?heartbeat=200"
	provider, err := weft.New(weft.WithoutEnv(), weft.WithLogger(quietLog), weft.WithService("node", &node{name: "p"}),
		weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
registries: {local: {address: "%s"}}
protocols: {dubbo: {port: 0}, tri: {port: 0}}
provider:
  services:
    node: {interface: org.weft.Node, protocol: "dubbo,tri"}
`, reg))))
	if err != nil {
		t.Fatal(err)
	}
	if err := provider.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer provider.Stop(context.Background())

	for _, want := range []string{"dubbo", "tri", ""} {
		t.Run("protocol="+want, func(t *testing.T) {
			rec := protoRecorder{mu: &sync.Mutex{}, protos: map[string]int{}}
			var c nodeClient
			proto := ""
			if want != "" {
				proto = ", protocol: " + want
			}
			app, err := weft.New(weft.WithoutEnv(), weft.WithLogger(quietLog), weft.WithReference("node", &c),
				weft.WithFilter("rec", nil, func() (extension.Filter, error) { return rec, nil }),
				weft.WithConfig(weft.ConfigYAML(fmt.Sprintf(`
registries: {local: {address: "%s"}}
consumer:
  references:
    node: {interface: org.weft.Node, filter: rec, loadbalance: roundrobin%s}
`, reg, proto))))
			if err != nil {
				t.Fatal(err)
			}
			if err := app.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			defer app.Stop(context.Background())
			deadline := time.Now().Add(10 * time.Second)
			for {
				_, err := c.Who(context.Background(), "x")
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no provider found: %v", err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			for range 20 {
				if got, err := c.Who(context.Background(), "x"); err != nil || got != "p" {
					t.Fatalf("who: %q %v", got, err)
				}
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			switch want {
			case "":
				if rec.protos["dubbo"] == 0 || rec.protos["tri"] == 0 {
					t.Fatalf("calls per protocol %v, want both", rec.protos)
				}
			default:
				if len(rec.protos) != 1 || rec.protos[want] == 0 {
					t.Fatalf("calls per protocol %v, want only %s", rec.protos, want)
				}
			}
		})
	}
}

// chat is a bidirectional Triple service: it echoes each message.
type chat struct{}

func (chat) Chat(ctx context.Context, st *proxy.BidiStream[*wrapperspb.StringValue, *wrapperspb.StringValue]) error {
	for {
		m, err := st.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := st.Send(wrapperspb.String("echo:" + m.GetValue())); err != nil {
			return err
		}
	}
}

type chatClient struct {
	Chat func(ctx context.Context) (*proxy.BidiStreamClient[*wrapperspb.StringValue, *wrapperspb.StringValue], error) `weft:"Chat"`
}

// countingStream counts the messages of the stream it wraps.
type countingStream struct {
	kernel.Stream
	sent, received *atomic.Int64
}

func (s countingStream) SendMsg(m any) error {
	s.sent.Add(1)
	return s.Stream.SendMsg(m)
}

func (s countingStream) RecvMsg(m any) error {
	err := s.Stream.RecvMsg(m)
	if err == nil {
		s.received.Add(1)
	}
	return err
}

// streamWatcher is a provider filter that sees a stream start and end and
// wraps its messages.
type streamWatcher struct {
	starts, ends, sent, received *atomic.Int64
}

func (f streamWatcher) Invoke(ctx context.Context, next kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
	f.starts.Add(1)
	for i, a := range inv.Args {
		if st, ok := a.(kernel.Stream); ok {
			inv.Args[i] = countingStream{Stream: st, sent: f.sent, received: f.received}
		}
	}
	res, err := next.Invoke(ctx, inv)
	f.ends.Add(1)
	return res, err
}

// TestFiltersSeeStreams: a provider filter sees a stream's start and end
// (its Invoke) and may wrap its messages.
func TestFiltersSeeStreams(t *testing.T) {
	var starts, ends, sent, received atomic.Int64
	w := streamWatcher{&starts, &ends, &sent, &received}
	addr := freePort(t)
	port := addr[strings.LastIndexByte(addr, ':')+1:]
	startApp(t, fmt.Sprintf(`
protocols: {tri: {port: %s}}
provider:
  services:
    chat: {interface: org.weft.Chat, protocol: tri}
`, port),
		weft.WithService("chat", chat{}),
		weft.WithFilter("watcher", &kernel.Activate{Groups: []string{kernel.GroupProvider}}, func() (extension.Filter, error) { return w, nil }))
	var c chatClient
	startApp(t, fmt.Sprintf(`
consumer:
  references:
    chat: {interface: org.weft.Chat, url: "tri://%s", retries: 0}
`, addr), weft.WithReference("chat", &c))
	st, err := c.Chat(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := st.Send(wrapperspb.String(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
		if m, err := st.Recv(); err != nil || m.GetValue() != fmt.Sprint("echo:", i) {
			t.Fatalf("answer %d: %v %v", i, m, err)
		}
	}
	st.CloseSend()
	if _, err := st.Recv(); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for ends.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if starts.Load() != 1 || ends.Load() != 1 || sent.Load() != 5 || received.Load() != 5 {
		t.Fatalf("filter saw %d starts, %d ends, %d sent, %d received; want 1, 1, 5, 5", starts.Load(), ends.Load(), sent.Load(), received.Load())
	}
}
