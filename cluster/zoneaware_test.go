package cluster

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// listDir lists its invokers as they are, available or not, as a
// RegistriesDirectory does.
type listDir struct {
	url *kernel.URL
	ivs []kernel.Invoker
}

func (d *listDir) URL() *kernel.URL { return d.url }
func (d *listDir) List(context.Context, *kernel.Invocation) ([]kernel.Invoker, error) {
	return d.ivs, nil
}
func (d *listDir) IsAvailable() bool { return true }
func (d *listDir) Destroy()          {}

// registryParts are the parts of registries given as "id?params", each
// answering its id, or err when set.
func registryParts(specs ...string) []*answering {
	out := make([]*answering, len(specs))
	for i, s := range specs {
		id, params, _ := strings.Cut(s, "?")
		u := kernel.MustParseURL("consumer://127.0.0.1/S?registry=" + id + "&" + params)
		out[i] = &answering{url: u, calls: &atomic.Int64{}, answer: func(u *kernel.URL, _ *kernel.Invocation) (any, error) {
			return u.Param(KeyRegistryID), nil
		}}
	}
	return out
}

func zoneAwareOver(ref string, parts []*answering) kernel.Invoker {
	lbs := kernel.NewLoader[extension.LoadBalance]("loadbalance", Random)
	lbs.Register(Random, func() (extension.LoadBalance, error) { return NewRandom(), nil }, nil)
	ivs := make([]kernel.Invoker, len(parts))
	for i, p := range parts {
		ivs[i] = p
	}
	iv, _ := NewZoneAware(lbs, quiet).Join(&listDir{url: kernel.MustParseURL(ref), ivs: ivs})
	return iv
}

func callIn(iv kernel.Invoker, attachments map[string]any) (any, error) {
	inv := kernel.NewInvocation("m")
	for k, v := range attachments {
		inv.SetAttachment(k, v)
	}
	res, err := iv.Invoke(context.Background(), inv)
	return res.Value, err
}

// ZoneAwareClusterInvokerTest and the order of its doInvoke: preferred,
// then the call's zone (forced: an error when none), then the load
// balancer by weight, then the first available.
func TestZoneAwareOrder(t *testing.T) {
	// Java: preferred=true on the 2nd of 3 is returned, whatever the zone.
	parts := registryParts("r1?registry.zone=hz", "r2?registry.preferred=true&registry.zone=sh", "r3")
	iv := zoneAwareOver("consumer://127.0.0.1/S", parts)
	if v, err := callIn(iv, map[string]any{KeyRegistryZone: "hz"}); v != "r2" || err != nil {
		t.Fatalf("preferred: %v %v", v, err)
	}
	// Unavailable, the preferred one is passed over.
	parts[1].down.Store(true)
	if v, err := callIn(iv, map[string]any{KeyRegistryZone: "hz"}); v != "r1" || err != nil {
		t.Fatalf("preferred down, zone hz: %v %v", v, err)
	}

	// Java: registry_zone=zone with only the 2nd in zone picks the 2nd; in
	// both spellings of the attachment, and from the reference's own zone.
	parts = registryParts("r1?registry.zone=hz", "r2?registry.zone=zone", "r3?registry.zone=sh")
	iv = zoneAwareOver("consumer://127.0.0.1/S", parts)
	for _, att := range []map[string]any{{KeyRegistryZone: "zone"}, {KeyRegistryZoneGo: "zone"}} {
		for range 20 {
			if v, err := callIn(iv, att); v != "r2" || err != nil {
				t.Fatalf("zone %v: %v %v", att, v, err)
			}
		}
	}
	local := zoneAwareOver("consumer://127.0.0.1/S?registry_zone=sh&m.registry_zone=hz", parts)
	if v, err := callIn(local, nil); v != "r1" || err != nil {
		t.Fatalf("the method's own zone hz: %v %v", v, err)
	}
	if v, err := callIn(local, map[string]any{KeyRegistryZone: "zone"}); v != "r2" || err != nil {
		t.Fatalf("the call's zone wins over the reference's: %v %v", v, err)
	}

	// Java: a zone no registry has, forced: an error naming the zone and
	// the registries; not forced, any registry.
	for _, att := range []map[string]any{
		{KeyRegistryZone: "bj", KeyRegistryZoneForce: "true"},
		{KeyRegistryZoneGo: "bj", KeyRegistryZoneForceGo: "TRUE"},
	} {
		_, err := callIn(iv, att)
		if kernel.CodeOf(err) != kernel.CodeNoProvider || !strings.Contains(err.Error(),
			"No registry instance in zone or no available providers in the registry, zone: bj, registries: r1 (zone hz), r2 (zone zone), r3 (zone sh)") {
			t.Fatalf("forced bj %v: %v", att, err)
		}
	}
	if _, err := callIn(iv, map[string]any{KeyRegistryZone: "bj", KeyRegistryZoneForce: "false"}); err != nil {
		t.Fatalf("bj not forced: %v", err)
	}
	// In zone but unavailable counts as no registry in the zone.
	parts[1].down.Store(true)
	if _, err := callIn(iv, map[string]any{KeyRegistryZone: "zone", KeyRegistryZoneForce: "true"}); kernel.CodeOf(err) != kernel.CodeNoProvider {
		t.Fatalf("forced to a zone whose registry is down: %v", err)
	}
}

// Without a preferred registry or a zone, the load balancer chooses by
// each registry's weight (no warm-up); one unavailable is passed over.
func TestZoneAwareBalancesByRegistryWeight(t *testing.T) {
	parts := registryParts("r1?weight=100", "r2?weight=300", "r3?weight=0")
	iv := zoneAwareOver("consumer://127.0.0.1/S", parts)
	const n = 4000
	for range n {
		if _, err := callIn(iv, nil); err != nil {
			t.Fatal(err)
		}
	}
	r1, r2 := parts[0].calls.Load(), parts[1].calls.Load()
	if share := float64(r2) / n; share < 0.70 || share > 0.80 || parts[2].calls.Load() != 0 {
		t.Fatalf("calls %d %d %d; want three quarters to r2 (weight 300 to 100), none to r3 (weight 0)", r1, r2, parts[2].calls.Load())
	}
	parts[1].down.Store(true)
	parts[0].down.Store(true)
	if v, err := callIn(iv, nil); v != "r3" || err != nil {
		t.Fatalf("only r3 available: %v %v", v, err)
	}
	parts[2].down.Store(true)
	if _, err := callIn(iv, nil); kernel.CodeOf(err) != kernel.CodeNoProvider || !strings.Contains(err.Error(), "No provider available in registries r1, r2, r3") {
		t.Fatalf("none available: %v", err)
	}
	// Java: an empty list fails (checkInvokers).
	if _, err := callIn(zoneAwareOver("consumer://127.0.0.1/S", nil), nil); kernel.CodeOf(err) != kernel.CodeNoProvider {
		t.Fatalf("no registry: %v", err)
	}
}

// A registry whose providers went since it was chosen passes the call on,
// unless the zone is forced; a business error is the answer.
func TestZoneAwarePassesOnWhatNoProviderRan(t *testing.T) {
	parts := registryParts("r1?registry.zone=hz", "r2?registry.zone=sh")
	gone := kernel.Errorf(kernel.CodeNetwork, "connection to r1 closed")
	parts[0].answer = func(*kernel.URL, *kernel.Invocation) (any, error) { return nil, gone }
	iv := zoneAwareOver("consumer://127.0.0.1/S?registry_zone=hz", parts)
	if v, err := callIn(iv, nil); v != "r2" || err != nil {
		t.Fatalf("r1's connection gone: %v %v, want r2's answer", v, err)
	}
	if _, err := callIn(iv, map[string]any{KeyRegistryZoneForce: "true"}); err != gone {
		t.Fatalf("forced to hz: %v, want r1's failure", err)
	}
	parts[0].answer = func(*kernel.URL, *kernel.Invocation) (any, error) { return nil, kernel.BizError(gone) }
	if _, err := callIn(iv, nil); !kernel.IsBiz(err) || parts[1].calls.Load() != 1 {
		t.Fatalf("business error: %v, r2 called %d times", err, parts[1].calls.Load())
	}
}
