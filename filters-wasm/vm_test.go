package wasmfilter_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	wasmfilter "github.com/weftrpc/weft/filters-wasm"
	"github.com/weftrpc/weft/kernel"
)

// testProxyVM: proxy-wasm filters with one vm_id and module share their
// instances, each with its own root context (configuration, root id), as
// Envoy's plugins of one VM do: the guest (proxywasm-go/headers) counts
// the plugin contexts of its instance in x-vm-plugins. A filter with
// another vm_id runs its own VM. Calls through both, from 8 goroutines,
// never see the other's configuration; closing one keeps the VM serving
// the other; VM-level settings that differ, and two filters on one root
// id, are refused by key path.
func testProxyVM(t *testing.T, path string) {
	pw := func(vmID, rootID, cfg string) wasmfilter.FilterSettings {
		return wasmfilter.FilterSettings{Path: path, ABI: wasmfilter.ABIProxyWasm, VMID: vmID, RootID: rootID, Configuration: cfg}
	}
	s := wasmfilter.Settings{Filters: map[string]wasmfilter.FilterSettings{
		"a": pw("edge", "root-a", "cfg-a"),
		"b": pw("edge", "root-b", "cfg-b"),
		"c": pw("other", "root-c", "cfg-c"),
	}}
	ds, err := s.Build(context.Background(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	fs := map[string]*wasmfilter.Filter{}
	for _, d := range ds {
		fs[d.Filter.Name()] = d.Filter
		defer d.Filter.Close()
	}
	call := func(f *wasmfilter.Filter) (map[string]any, kernel.Result, error) {
		var seen map[string]any
		ep := newEndpoint()
		ep.seen = func(inv *kernel.Invocation) { seen = inv.Attachments() }
		res, err := f.Invoke(context.Background(), ep, kernel.NewInvocation("sayHello", "world"))
		return seen, res, err
	}
	check := func(name, plugins string) error {
		seen, res, err := call(fs[name])
		if err != nil {
			return err
		}
		if seen["x-proxy-wasm"] != "cfg-"+name || seen["x-vm-plugins"] != plugins || res.Attachments["x-served-by"] != "root-"+name {
			return fmt.Errorf("filter %s: configuration %v, plugins in its instance %v, served by %v; want cfg-%s, %s, root-%s",
				name, seen["x-proxy-wasm"], seen["x-vm-plugins"], res.Attachments["x-served-by"], name, plugins, name)
		}
		return nil
	}
	for _, c := range []struct{ name, plugins string }{{"a", "2"}, {"b", "2"}, {"c", "1"}} {
		if err := check(c.name, c.plugins); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				name := []string{"a", "b"}[(g+i)%2]
				if err := check(name, "2"); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	a, b, c := fs["a"].Stats(), fs["b"].Stats(), fs["c"].Stats()
	if a.Created != b.Created || a.Live != b.Live || a.Created == 0 {
		t.Errorf("a and b report %d/%d instances created and %d/%d live: want one pool's figures", a.Created, b.Created, a.Live, b.Live)
	}
	if a.Calls != 1+160 || b.Calls != 1+160 {
		t.Errorf("calls: a %d, b %d; want each filter's own, 161 each", a.Calls, b.Calls)
	}
	if c.Created == 0 || c.Calls != 1 {
		t.Errorf("c (another vm_id): %+v", c)
	}
	if err := fs["b"].Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v := fs["a"].Stats().Version; v != 2 {
		t.Errorf("a reload through b: a's version %d, want 2 (one module for the VM)", v)
	}
	fs["a"].Close()
	if err := check("b", "2"); err != nil {
		t.Fatalf("after a closed, b: %v", err)
	}
	if _, _, err := call(fs["a"]); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("a call through a closed filter: %v, want closed", err)
	}

	for _, bad := range []struct {
		b    wasmfilter.FilterSettings
		want string
	}{
		{func() wasmfilter.FilterSettings { b := pw("edge", "root-b", "x"); b.MaxMemoryPages = 1024; return b }(), "differ in max_memory_pages"},
		{pw("edge", "root-a", "x"), `share vm_id "edge" and root_id "root-a"`},
	} {
		s := wasmfilter.Settings{Filters: map[string]wasmfilter.FilterSettings{"a": pw("edge", "root-a", "cfg-a"), "b": bad.b}}
		if ds, err := s.Build(context.Background(), quiet); err == nil || !strings.Contains(err.Error(), "wasm.filters.a (the host of vm_id \"edge\")") || !strings.Contains(err.Error(), bad.want) {
			for _, d := range ds {
				d.Filter.Close()
			}
			t.Errorf("Build: %v, want %q by key path", err, bad.want)
		}
	}
}
