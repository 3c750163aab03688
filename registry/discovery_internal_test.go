package registry

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// The metadata cache keeps only the revisions some instance still serves:
// every provider change makes a new revision, and a long-lived consumer
// must not keep them all.
func TestForgetDropsRevisionsNoInstanceServes(t *testing.T) {
	r := &instanceRegistry{cache: map[string]*MetadataInfo{
		"a\x00r1": {}, "a\x00r2": {}, "b\x00r1": {},
	}}
	r.forget("a", []string{"r2"})
	if _, ok := r.cache["a\x00r1"]; ok {
		t.Error("a's revision r1, served by no instance, stayed cached")
	}
	if _, ok := r.cache["a\x00r2"]; !ok {
		t.Error("a's live revision r2 was dropped")
	}
	if _, ok := r.cache["b\x00r1"]; !ok {
		t.Error("another application's revision was dropped")
	}
}

// A revision whose metadata could not be read is asked for again on its
// own (Java's AddressRefreshRetryTask), not only at the application's next
// change: the provider the consumer missed comes in once its
// MetadataService answers, and the retries stop then.
func TestMissingMetadataIsFetchedAgain(t *testing.T) {
	var fetches atomic.Int32
	md := &MetadataInfo{App: "vault-app", Revision: "r1", Services: map[string]*ServiceInfo{
		"org.weft.Vault:dubbo": {Name: "org.weft.Vault", Protocol: "dubbo", Port: 20880},
	}}
	r := newInstanceRegistry(unsubscribeOnly{}, "client-app", func(ctx context.Context, u *kernel.URL, rev string) (*MetadataInfo, error) {
		if fetches.Add(1) <= 2 {
			return nil, errors.New("getMetadataInfo timed out")
		}
		return md, nil
	}, func() *kernel.URL { return nil }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	got := make(chan int, 16)
	s := &appSubscription{r: r, consumer: kernel.NewURL("consumer", "127.0.0.1", 0, "org.weft.Vault", nil),
		listener: notifyFunc(func(urls []*kernel.URL) { got <- len(urls) }),
		apps:     map[string][]extension.ServiceInstance{"vault-app": nil}, stop: make(chan struct{})}
	defer s.close(context.Background())
	s.NotifyInstances("vault-app", []extension.ServiceInstance{{App: "vault-app", Host: "127.0.0.1", Port: 20880, Metadata: map[string]string{
		MetaRevision: "r1", MetaServiceURL: `{"protocol":"dubbo","port":"20880"}`,
	}}})
	if n := <-got; n != 0 {
		t.Fatalf("first delivery, metadata unreadable: %d providers, want 0", n)
	}
	start := time.Now()
	for n := 0; n == 0; {
		select {
		case n = <-got:
		case <-time.After(10 * time.Second):
			t.Fatalf("no provider 10 s after its metadata became readable (%d fetches)", fetches.Load())
		}
	}
	// Two failures: retried after 1 s, then 2 s.
	if d := time.Since(start); d < 2*time.Second {
		t.Errorf("found after %v: the retries came faster than 1 s, 2 s", d)
	}
	time.Sleep(2500 * time.Millisecond)
	if n := fetches.Load(); n != 3 {
		t.Errorf("%d fetches, want 3: the retries go on after the metadata was read", n)
	}
}

// unsubscribeOnly is the one call of a ServiceDiscovery a subscription
// made by hand makes (close).
type unsubscribeOnly struct{ extension.ServiceDiscovery }

func (unsubscribeOnly) Unsubscribe(context.Context, string, extension.InstanceListener) error {
	return nil
}

type notifyFunc func([]*kernel.URL)

func (f notifyFunc) Notify(urls []*kernel.URL) { f(urls) }
