package xds

import (
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// hostileADS is a management server that serves a valid configuration,
// then whatever the test makes it send: xDS as an attacker (or a broken
// control plane) speaks it.
type hostileADS struct {
	discoverygrpc.UnimplementedAggregatedDiscoveryServiceServer
	valid map[string][]proto.Message // by type URL
	// extra, once every type was ACKed on a stream, is sent in order.
	extra   func(send func(*discoverygrpc.DiscoveryResponse) error) error
	version atomic.Int64
	streams atomic.Int64
	once    sync.Once // extra is sent on the first stream that ACKs
	nacks   atomic.Int64
	mu      sync.Mutex
	nackMsg []string
	acked   chan struct{}
}

func (h *hostileADS) StreamAggregatedResources(st discoverygrpc.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	var sendMu sync.Mutex
	send := func(r *discoverygrpc.DiscoveryResponse) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return st.Send(r)
	}
	h.streams.Add(1)
	sent := map[string]string{} // type -> nonce of the valid response
	acked := map[string]bool{}
	for {
		req, err := st.Recv()
		if err != nil {
			return err
		}
		if d := req.GetErrorDetail(); d != nil {
			h.nacks.Add(1)
			h.mu.Lock()
			h.nackMsg = append(h.nackMsg, d.GetMessage())
			h.mu.Unlock()
			continue
		}
		url := req.GetTypeUrl()
		if req.GetResponseNonce() != "" && req.GetResponseNonce() == sent[url] {
			acked[url] = true
			if len(acked) == len(h.valid) && h.extra != nil {
				h.once.Do(func() {
					h.acked <- struct{}{}
					go h.extra(send)
				})
			}
			continue
		}
		if _, ok := sent[url]; ok || len(req.GetResourceNames()) == 0 {
			continue
		}
		resp := &discoverygrpc.DiscoveryResponse{TypeUrl: url, VersionInfo: strconv.FormatInt(h.version.Add(1), 10)}
		for _, m := range h.valid[url] {
			a, _ := anypb.New(m)
			resp.Resources = append(resp.Resources, a)
		}
		resp.Nonce = "valid-" + resp.VersionInfo
		sent[url] = resp.Nonce
		if err := send(resp); err != nil {
			return err
		}
	}
}

func startHostile(t *testing.T, h *hostileADS) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(grpc.MaxSendMsgSize(64 << 20))
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(s, h)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// TestHostileControlPlane: a management server that, once weft's consumer
// runs on its valid configuration (8 callers), sends a response of a type
// weft never asked for, a listener nested 100,000 Anys deep, a response
// over the 16 MiB message bound, and a flood of 1,000 endpoint updates of
// 256 KiB each. The unknown type is ignored; the nested listener is NACKed
// with the reason; the oversized response ends the stream, which is
// opened again; the flood is taken one response at a time with the heap
// bounded; the calls go on with 0 failed.
func TestHostileControlPlane(t *testing.T) {
	_, aAddr, _ := startProvider(t, "a")
	valid := map[string][]proto.Message{
		ListenerType: {listener()},
		RouteType:    {routes(map[string]uint32{"echo": 1})},
		ClusterType:  {edsCluster("echo", 0)},
		EndpointType: {endpoints("echo", []string{aAddr})},
	}
	const flood = 1000
	var floodSent atomic.Int64
	h := &hostileADS{valid: valid, acked: make(chan struct{}, 1)}
	// A listener nested 100,000 groups deep (an unknown field's groups,
	// which a decoder must walk to skip): a recursion bomb of 600 KB.
	nested := func(depth int) *anypb.Any {
		var b []byte
		for range depth {
			b = protowire.AppendTag(b, 9999, protowire.StartGroupType)
		}
		for range depth {
			b = protowire.AppendTag(b, 9999, protowire.EndGroupType)
		}
		b = append(b, mustMarshal(listener())...)
		return &anypb.Any{TypeUrl: ListenerType, Value: b}
	}
	// 256 KiB of endpoints' padding: the same endpoint, a long locality
	// name.
	big := endpoints("echo", []string{aAddr})
	big.Endpoints[0].Locality.SubZone = strings.Repeat("x", 256<<10)
	bigAny, _ := anypb.New(big)
	h.extra = func(send func(*discoverygrpc.DiscoveryResponse) error) error {
		n := func() string { return strconv.FormatInt(h.version.Add(1), 10) }
		v := n()
		if err := send(&discoverygrpc.DiscoveryResponse{TypeUrl: "type.googleapis.com/example.Unknown", VersionInfo: v, Nonce: "u" + v}); err != nil {
			return err
		}
		v = n()
		deep := nested(100_000)
		if err := send(&discoverygrpc.DiscoveryResponse{TypeUrl: ListenerType, VersionInfo: v, Nonce: "deep" + v, Resources: []*anypb.Any{deep}}); err != nil {
			return err
		}
		for range flood {
			v = n()
			if err := send(&discoverygrpc.DiscoveryResponse{TypeUrl: EndpointType, VersionInfo: v, Nonce: "flood" + v, Resources: []*anypb.Any{bigAny}}); err != nil {
				return err
			}
			floodSent.Add(1)
		}
		// Over the client's 16 MiB bound: the stream ends.
		huge := endpoints("echo", []string{aAddr})
		huge.Endpoints[0].Locality.SubZone = strings.Repeat("y", 20<<20)
		hugeAny, _ := anypb.New(huge)
		v = n()
		return send(&discoverygrpc.DiscoveryResponse{TypeUrl: EndpointType, VersionInfo: v, Nonce: "huge" + v, Resources: []*anypb.Any{hugeAny}})
	}
	addr := startHostile(t, h)
	c := startConsumer(t, addr)
	before := heapInUse()
	l := startLoad(8, c)
	select {
	case <-h.acked:
	case <-time.After(10 * time.Second):
		t.Fatal("the valid configuration was never ACKed")
	}
	var peak uint64
	deadline := time.Now().Add(60 * time.Second)
	for floodSent.Load() < flood {
		if time.Now().After(deadline) {
			t.Fatalf("the flood did not get through: %d of %d sent", floodSent.Load(), flood)
		}
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		peak = max(peak, m.HeapInuse)
		time.Sleep(20 * time.Millisecond)
	}
	for deadline := time.Now().Add(10 * time.Second); h.streams.Load() < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the oversized response did not end the stream (no second stream came)")
		}
	}
	time.Sleep(300 * time.Millisecond) // calls on the new stream's configuration
	l.stop(t)
	h.mu.Lock()
	nacks := append([]string(nil), h.nackMsg...)
	h.mu.Unlock()
	t.Logf("calls %d, failed %d; NACKs %q; heap in use %d MiB before, peak %d MiB during the flood of %d × 256 KiB; %d streams",
		l.calls.Load(), l.failed.Load(), nacks, before>>20, peak>>20, flood, h.streams.Load())
	if len(nacks) != 1 || !strings.Contains(nacks[0], "Listener") {
		t.Errorf("NACKs %q: want one, for the nested listener", nacks)
	}
	if peak > before+128<<20 {
		t.Errorf("heap peak %d MiB over %d MiB before: the flood was not bounded", peak>>20, before>>20)
	}
}

func mustMarshal(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}
