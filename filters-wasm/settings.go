package wasmfilter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/kernel/view"
)

// Settings is the `wasm:` block of weft's config: the filters written in
// WebAssembly (sdk/ABI.md). Each is checked (Validate) and compiled (Build)
// when the App is built, so a bad one fails weft.New with its key path.
type Settings struct {
	// Filters are keyed by the filter's extension name, the name filter
	// lists use (`filter: "wasm-authz,default"`).
	Filters map[string]FilterSettings `koanf:"filters"`
}

// FilterSettings declares one WASM filter (`wasm.filters.<name>`). It activates like a native
// filter: with Groups (and Keys) it joins the activated set of those groups
// at Order; without Groups it runs only where a filter list names it.
type FilterSettings struct {
	// Path is the module file. A relative path set by a config file is
	// relative to that file's directory (weft.LoadConfig makes it absolute), one
	// set by a YAML string or a WEFT_* variable to the working directory.
	// It is watched: a new file replaces the module without a restart.
	Path string `koanf:"path"`
	// URL is where the module is fetched from at start-up instead of a
	// file (http:// or https://; Envoy's remote code source), once, with
	// SHA256 required. It is not watched: a new module is a new URL or
	// digest.
	URL string `koanf:"url"`
	// SHA256 pins the module: the hex SHA-256 of its bytes. A module whose
	// digest differs is refused at start-up, and a changed file is not
	// reloaded until it matches (Envoy's and Istio's sha256).
	SHA256 string   `koanf:"sha256"`
	Groups []string `koanf:"groups"`
	Keys   []string `koanf:"keys"`
	Order  int      `koanf:"order"`
	// MaxMemoryPages caps each instance's memory in 64 KiB pages (default
	// 512, 32 MiB).
	MaxMemoryPages int `koanf:"max_memory_pages"`
	// Timeout (ms) bounds each guest callback of a call that has no deadline
	// of its own (default 1000); a call's deadline applies when it has one.
	Timeout int `koanf:"timeout"`
	// MaxInstances caps the module's instances (idle, busy and starting,
	// the pool's spare included); a call that finds all busy waits for one
	// until its deadline (Timeout without one), then fails as limit
	// exceeded. 0 or unset: no cap, instances made as concurrent calls need
	// them.
	MaxInstances int `koanf:"max_instances"`
	// Config is the filter's own configuration, given to the guest as JSON
	// by get_config (weft's ABI).
	Config map[string]any `koanf:"config"`
	// ABI is the guest's: weft (sdk/ABI.md, the default) or proxy-wasm
	// (the ABI of Envoy's and Istio's WASM filters, 0.2.1, 0.2.0 or 0.1.0).
	ABI string `koanf:"abi"`
	// FailOpen lets a call through when the guest fails (a trap, a timeout,
	// its memory cap) instead of failing it: Istio's failStrategy
	// FAIL_OPEN. Default false: fail closed.
	FailOpen bool `koanf:"fail_open"`
	// The plugin settings of a proxy-wasm filter, Envoy's names:
	// Configuration is handed to proxy_on_configure (a string as it is, a
	// map or list as compact JSON with sorted keys), VMConfiguration to
	// proxy_on_vm_start, RootID is plugin_root_id (which of the module's
	// root contexts serves the filter), VMID is plugin_vm_id: filters with
	// one vm_id share their shared data and queues (weft-ABI filters too),
	// and proxy-wasm filters with one vm_id, module and vm_configuration
	// one VM: its instances (vm.go).
	Configuration   any    `koanf:"configuration"`
	VMConfiguration any    `koanf:"vm_configuration"`
	RootID          string `koanf:"root_id"`
	VMID            string `koanf:"vm_id"`
	// Clusters name the upstreams a filter's callouts may reach
	// (proxy-wasm's proxy_http_call, Envoy's clusters; weft's http_call):
	// name -> base URL, http:// or https://, or ref:<reference id>.
	Clusters map[string]string `koanf:"clusters"`
	// MaxCallouts bounds the callouts of the filter in flight (default
	// 16); past it proxy_http_call answers INTERNAL_FAILURE, http_call
	// LIMIT.
	MaxCallouts int `koanf:"max_callouts"`
	// AllowedCapabilities lists the proxy-wasm host functions and
	// callbacks the filter may use (Envoy's allowed_capabilities); unset:
	// all. A host function not listed answers INTERNAL_FAILURE, with a log
	// line naming it; a callback not listed is never called. For a
	// weft-ABI filter: the v1.1 host functions it may call (v1's are
	// always allowed); one not listed answers REFUSED, with a log line.
	AllowedCapabilities []string `koanf:"allowed_capabilities"`
	// Body lists the bodies a proxy-wasm filter gets, "request" and/or
	// "response" (default none: the headers callbacks get end_of_stream
	// and no body callback runs, since a body costs a serialization).
	Body []string `koanf:"body"`
}

// pluginBytes is a proxy-wasm configuration value as the guest gets it.
func pluginBytes(v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case string:
		return []byte(x), nil
	case []byte:
		return x, nil
	}
	js, err := json.Marshal(view.Generic(v))
	if err != nil {
		return nil, fmt.Errorf("not representable as JSON: %w", err)
	}
	return js, nil
}

// Validate reports the settings of every filter that have no meaning, by
// key path, with what is allowed and the fix.
func (s Settings) Validate() []error {
	var errs []error
	bad := func(path string, v int, want, fix string) {
		errs = append(errs, fmt.Errorf("%s: %d is not allowed: want %s; %s", path, v, want, fix))
	}
	for _, name := range sortedNames(s.Filters) {
		fc, path := s.Filters[name], "wasm.filters."+name
		if fc.MaxMemoryPages < 0 || fc.MaxMemoryPages > 65536 {
			bad(path+".max_memory_pages", fc.MaxMemoryPages, "0..65536 pages of 64 KiB, 65536 being wasm32's 4 GiB (0 or unset: the default 512, 32 MiB)",
				"set the memory cap of an instance in pages, e.g. max_memory_pages: 512")
		}
		if fc.Timeout < 0 {
			bad(path+".timeout", fc.Timeout, ">= 0 ms (0 or unset: the default 1000 ms)", "set the ms each guest callback may take, or remove the key")
		}
		errs = append(errs, validateCallouts(path, fc)...)
		errs = append(errs, validateSource(path, fc)...)
		switch fc.ABI {
		case "", ABIWeft:
			for _, k := range []struct {
				key string
				set bool
			}{{"configuration", fc.Configuration != nil}, {"vm_configuration", fc.VMConfiguration != nil}, {"root_id", fc.RootID != ""},
				{"body", len(fc.Body) > 0}} {
				if k.set {
					errs = append(errs, fmt.Errorf("%s.%s: a proxy-wasm setting on a filter of weft's ABI; set abi: proxy-wasm, or give a weft-ABI filter its settings under config", path, k.key))
				}
			}
		case ABIProxyWasm:
			for i, b := range fc.Body {
				if b != BodyRequest && b != BodyResponse {
					errs = append(errs, fmt.Errorf("%s.body[%d]: %q is not a body; known: %s, %s; e.g. body: [request]", path, i, b, BodyRequest, BodyResponse))
				}
			}
			if len(fc.Config) > 0 {
				errs = append(errs, fmt.Errorf("%s.config: a proxy-wasm filter gets its settings from configuration (proxy_on_configure), not config (weft's get_config); rename the key", path))
			}
		default:
			errs = append(errs, fmt.Errorf("%s.abi: %q is not known: want %s (the default) or %s", path, fc.ABI, ABIWeft, ABIProxyWasm))
		}
		if fc.MaxInstances < 0 || int64(fc.MaxInstances) > 1<<31-1 {
			bad(path+".max_instances", fc.MaxInstances, ">= 0 instances (0 or unset: no cap, instances made as concurrent calls need them)",
				"set the most instances of the module at once, e.g. max_instances: 8, or 0 for no cap")
		}
	}
	return errs
}

// validateSource checks where the module comes from: a path or a URL
// (not both), and the digest that pins it, required with a URL.
func validateSource(path string, fc FilterSettings) []error {
	var errs []error
	if fc.Path != "" && fc.URL != "" {
		errs = append(errs, fmt.Errorf("%s: both path and url are set; a filter has one module: keep path (a file, watched) or url (fetched at start-up, pinned by sha256)", path))
	}
	if fc.URL != "" {
		u, err := url.Parse(fc.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("%s.url: %q is not an http:// or https:// URL; give where the module is served, e.g. https://example.com/filters/jwt.wasm", path, fc.URL))
		}
		if fc.SHA256 == "" {
			errs = append(errs, fmt.Errorf("%s.sha256: required with url: a fetched module must be pinned; set it to the output of `sha256sum` on the module", path))
		}
	}
	if fc.SHA256 != "" {
		if _, err := parseDigest(fc.SHA256); err != nil {
			errs = append(errs, fmt.Errorf("%s.sha256: %w", path, err))
		}
	}
	return errs
}

// validateCallouts checks the callout settings of a filter of either ABI
// (proxy_http_call, http_call): its clusters and max_callouts.
func validateCallouts(path string, fc FilterSettings) []error {
	var errs []error
	for _, name := range sortedKeys(fc.Clusters) {
		if ref, ok := strings.CutPrefix(fc.Clusters[name], refPrefix); ok {
			if ref == "" {
				errs = append(errs, fmt.Errorf("%s.clusters.%s: ref: names no reference; write ref:<id of consumer.references.<id>>", path, name))
			}
			continue
		}
		u, err := url.Parse(fc.Clusters[name])
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("%s.clusters.%s: %q is neither an http:// or https:// URL nor ref:<reference id>; give the upstream's base URL, e.g. http://127.0.0.1:8080, or a reference of this App, e.g. ref:auth", path, name, fc.Clusters[name]))
		}
	}
	if fc.MaxCallouts < 0 {
		errs = append(errs, fmt.Errorf("%s.max_callouts: %d is not allowed: want >= 0 (0 or unset: the default 16); set the most callouts in flight, or remove the key", path, fc.MaxCallouts))
	}
	return errs
}

// Activation is the filter's Activate: nil (it runs only where a filter
// list names it) without groups.
func (fc FilterSettings) Activation() (*kernel.Activate, error) {
	if len(fc.Groups) == 0 {
		if len(fc.Keys) > 0 {
			return nil, errors.New("keys without groups: keys narrow the activation of groups; add groups: [provider] or [consumer]")
		}
		return nil, nil
	}
	for _, g := range fc.Groups {
		if g != kernel.GroupProvider && g != kernel.GroupConsumer {
			return nil, fmt.Errorf("groups: unknown group %q (known: %s, %s)", g, kernel.GroupConsumer, kernel.GroupProvider)
		}
	}
	return &kernel.Activate{Groups: fc.Groups, Keys: fc.Keys, Order: fc.Order}, nil
}

// PathKey reports whether a flattened key is wasm.filters.<name>.path,
// and the name. (A path key inside a filter's free-form config has more
// levels, and is not one.)
func PathKey(key string) (string, bool) {
	name, ok := strings.CutPrefix(key, "wasm.filters.")
	if !ok {
		return "", false
	}
	name, ok = strings.CutSuffix(name, ".path")
	return name, ok && name != "" && !strings.Contains(name, ".")
}

// ResolvePaths makes a relative wasm.filters.<name>.path set by a config
// file relative to that file's directory, as an absolute path: a config file
// and the modules it names are deployed together, wherever the App is started
// from, and an absolute path stays right if the working directory changes
// while the App runs (the file is polled for reloads). A path from a YAML
// string or the environment has no file to be relative to and stays relative
// to the working directory.
func (s Settings) ResolvePaths(from map[string]string) error {
	for name, wc := range s.Filters {
		file := from[name]
		if file == "" || wc.Path == "" || filepath.IsAbs(wc.Path) {
			continue
		}
		dir, err := filepath.Abs(filepath.Dir(file))
		if err != nil {
			return fmt.Errorf("weft: config: wasm.filters.%s.path: cannot resolve %q against the directory of %s: %w", name, wc.Path, file, err)
		}
		wc.Path = filepath.Join(dir, wc.Path)
		s.Filters[name] = wc
	}
	return nil
}

// Declared is one filter that Build compiled.
type Declared struct {
	Filter   *Filter
	Activate *kernel.Activate
	// Source is the key that declared it (wasm.filters.<name>).
	Source string
}

// Build compiles and checks every declared filter, in name order, when the
// App is built rather than on first use, so that a missing file or a module
// that breaks the ABI fails weft.New with its key path, like any other
// config error. The filters share one counter store (per App: counters are
// never global). On an error, those already made are closed.
func (s Settings) Build(ctx context.Context, log *slog.Logger) ([]Declared, error) {
	counters, shared := NewCounters(), NewSharedData()
	var errs []error
	type member struct {
		name string
		act  *kernel.Activate
		cfg  Config
	}
	// Proxy-wasm filters with one vm_id, module and vm_configuration make
	// one VM (vm.go), hosted by the first by name; the others a VM each.
	var vms [][]member
	vmOf := map[string]int{}
	fetched := map[string][]byte{} // a URL is fetched once
	for _, name := range sortedNames(s.Filters) {
		fc, path := s.Filters[name], "wasm.filters."+name
		act, err := fc.Activation()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", path, err))
			continue
		}
		if fc.Path == "" && fc.URL == "" {
			errs = append(errs, fmt.Errorf("%s.path: the module file is required (or url: with sha256:)", path))
			continue
		}
		var module []byte
		source := fc.Path
		if fc.URL != "" {
			source = fc.URL
			if module = fetched[fc.URL]; module == nil {
				if module, err = fetchModule(ctx, fc.URL); err != nil {
					errs = append(errs, fmt.Errorf("%s.url: %w", path, err))
					continue
				}
				fetched[fc.URL] = module
			}
		}
		cfg, err := pluginBytes(fc.Configuration)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.configuration: %w", path, err))
			continue
		}
		vmCfg, err := pluginBytes(fc.VMConfiguration)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.vm_configuration: %w", path, err))
			continue
		}
		m := member{name, act, Config{
			Name: name, Path: source, Module: module, SHA256: fc.SHA256, MaxMemoryPages: uint32(fc.MaxMemoryPages),
			Timeout: time.Duration(fc.Timeout) * time.Millisecond, Settings: fc.Config,
			MaxInstances: fc.MaxInstances, Log: log, Counters: counters, Shared: shared,
			ABI: fc.ABI, FailOpen: fc.FailOpen, RootID: fc.RootID, VMID: fc.VMID,
			Configuration: cfg, VMConfiguration: vmCfg, Clusters: fc.Clusters, MaxCallouts: fc.MaxCallouts,
			AllowedCapabilities: fc.AllowedCapabilities, Body: fc.Body,
		}}
		key := ""
		if fc.ABI == ABIProxyWasm && fc.VMID != "" {
			key = fc.VMID + "\x00" + source + "\x00" + string(vmCfg)
		}
		if i, ok := vmOf[key]; ok && key != "" {
			vms[i] = append(vms[i], m)
			continue
		}
		vmOf[key] = len(vms)
		vms = append(vms, []member{m})
	}
	var out []Declared
	for _, vm := range vms {
		cs := make([]Config, len(vm))
		for i, m := range vm {
			cs[i] = m.cfg
		}
		fs, err := NewVM(ctx, cs)
		if err != nil {
			if len(vm) == 1 {
				errs = append(errs, fmt.Errorf("wasm.filters.%s: %w", vm[0].name, err))
			} else {
				errs = append(errs, fmt.Errorf("wasm.filters.%s (the host of vm_id %q): %w", vm[0].name, vm[0].cfg.VMID, err))
			}
			continue
		}
		for i, f := range fs {
			out = append(out, Declared{Filter: f, Activate: vm[i].act, Source: "wasm.filters." + vm[i].name})
		}
	}
	if len(errs) > 0 {
		for _, d := range out {
			d.Filter.Close()
		}
		return nil, errors.Join(errs...)
	}
	slices.SortFunc(out, func(a, b Declared) int { return strings.Compare(a.Source, b.Source) })
	return out, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sortedNames(m map[string]FilterSettings) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
