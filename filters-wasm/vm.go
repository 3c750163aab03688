package wasmfilter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
)

// A VM, as Envoy and Istio have it: proxy-wasm filters ("plugins") with
// one vm_id that run one module with one vm_configuration share their
// instances. Each instance holds one root context per filter (its own
// root_id, configuration, tick, callouts), created and configured when
// the instance starts; a call through filter k gets a stream context
// whose parent is k's root context. The first filter by name hosts the
// VM: the runtime, the module versions and the pool (its size, its
// memory cap, its allowed capabilities) are its, and a reload of its
// module reaches every filter. Shared data and queues are keyed by vm_id
// alone, so filters with one vm_id and different modules (two VMs) still
// share those, as in Envoy.
//
// An instance serves one call at a time whichever filter it is for: in.f
// is the filter whose callbacks run (acquire, the tick and queue loops
// and start-up set it), so host functions see that filter's settings.

// NewVM makes the filters of one VM from their configs: proxy-wasm
// filters with one vm_id, one module and one vm_configuration, distinct
// root ids, and the same VM-level settings (max_memory_pages,
// max_instances, allowed_capabilities, sha256). The first hosts the VM
// and its module is read from its Path (or Module). The filters close
// each on its own; the VM closes with the last.
func NewVM(ctx context.Context, cs []Config) ([]*Filter, error) {
	if len(cs) == 0 {
		return nil, errors.New("wasmfilter: a VM needs a filter")
	}
	if len(cs) == 1 {
		f, err := New(ctx, cs[0])
		if err != nil {
			return nil, err
		}
		return []*Filter{f}, nil
	}
	if err := vmCompatible(cs); err != nil {
		return nil, err
	}
	fs := make([]*Filter, len(cs))
	for i, c := range cs {
		f, err := prepare(c)
		if err != nil {
			return nil, fmt.Errorf("filter %q: %w", c.Name, err)
		}
		fs[i] = f
	}
	host, c := fs[0], cs[0]
	data := c.Module
	host.inMem = data != nil
	if data == nil {
		st, b, err := readStamped(c.Path)
		if err != nil {
			return nil, err
		}
		data, host.tried = b, st
	}
	if err := host.startVM(ctx, fs, data); err != nil {
		return nil, err
	}
	return fs, nil
}

// vmCompatible says why cs cannot share a VM, if they cannot.
func vmCompatible(cs []Config) error {
	h := cs[0]
	roots := map[string]string{}
	for i, c := range cs {
		if c.ABI != ABIProxyWasm {
			return fmt.Errorf("filter %q: only proxy-wasm filters share a VM (weft's ABI has no root contexts); its vm_id shares shared data and queues only", c.Name)
		}
		if other, dup := roots[c.RootID]; dup {
			return fmt.Errorf("filters %q and %q share vm_id %q and root_id %q: one VM has one root context per root_id, which cannot hold two configurations; give one of them another root_id the module serves, or another vm_id", other, c.Name, c.VMID, c.RootID)
		}
		roots[c.RootID] = c.Name
		if i == 0 {
			continue
		}
		differ := func(key string) error {
			return fmt.Errorf("filters %q and %q share vm_id %q (and so their instances) but differ in %s, a setting of the VM: give them the same %s, or different vm_ids", h.Name, c.Name, c.VMID, key, key)
		}
		switch {
		case c.VMID != h.VMID || c.VMID == "":
			return fmt.Errorf("filters %q and %q: a VM is named by one vm_id (%q, %q)", h.Name, c.Name, h.VMID, c.VMID)
		case c.Path != h.Path || !bytes.Equal(c.Module, h.Module):
			return differ("module (path or url)")
		case !bytes.Equal(c.VMConfiguration, h.VMConfiguration):
			return differ("vm_configuration")
		case c.MaxMemoryPages != h.MaxMemoryPages:
			return differ("max_memory_pages")
		case c.MaxInstances != h.MaxInstances:
			return differ("max_instances")
		case c.SHA256 != h.SHA256:
			return differ("sha256")
		case !sameSet(c.AllowedCapabilities, h.AllowedCapabilities):
			return differ("allowed_capabilities")
		}
	}
	return nil
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}
