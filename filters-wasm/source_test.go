package wasmfilter_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	wasmfilter "github.com/weftrpc/weft/filters-wasm"
	"github.com/weftrpc/weft/kernel"
)

func digest(b []byte) string { d := sha256.Sum256(b); return hex.EncodeToString(d[:]) }

// A module pinned by sha256 loads only with those bytes: at start-up, and
// at a reload, where a changed file is refused and the pinned module keeps
// serving.
func TestModulePinnedBySHA256(t *testing.T) {
	dir := t.TempDir()
	path := buildWAT(t, dir, "proxywasm", "")
	good := mustRead(t, path)
	f := newFilter(t, path, wasmfilter.Config{Name: "pinned", ABI: wasmfilter.ABIProxyWasm, SHA256: digest(good)})
	if _, err := f.Invoke(context.Background(), newEndpoint(), kernel.NewInvocation("sayHello")); err != nil {
		t.Fatal(err)
	}
	other := mustRead(t, buildWAT(t, t.TempDir(), "proxywasm010", ""))
	if err := os.WriteFile(path, other, 0o644); err != nil {
		t.Fatal(err)
	}
	err := f.Reload(context.Background())
	if err == nil || !strings.Contains(err.Error(), "sha256 "+digest(other)) || !strings.Contains(err.Error(), "pins "+digest(good)) {
		t.Fatalf("reload of other bytes: %v, want a refusal naming both digests", err)
	}
	if st := f.Stats(); st.Version != 1 || st.FailedReloads != 1 {
		t.Errorf("after the refused reload: version %d, failed reloads %d; want 1 and 1", st.Version, st.FailedReloads)
	}
	if _, err := f.Invoke(context.Background(), newEndpoint(), kernel.NewInvocation("sayHello")); err != nil {
		t.Errorf("the pinned module stopped serving: %v", err)
	}
	_, err = wasmfilter.New(context.Background(), wasmfilter.Config{Name: "wrong", Path: path, ABI: wasmfilter.ABIProxyWasm, SHA256: digest(good)})
	if err == nil || !strings.Contains(err.Error(), "update sha256") {
		t.Errorf("New with the wrong bytes: %v, want a refusal with the fix", err)
	}
	_, err = wasmfilter.New(context.Background(), wasmfilter.Config{Name: "bad", Path: path, ABI: wasmfilter.ABIProxyWasm, SHA256: "abc"})
	if err == nil || !strings.Contains(err.Error(), "64 hex digits") {
		t.Errorf("a malformed sha256: %v, want the expected form", err)
	}
}

// A module fetched from a URL (a real HTTP server on loopback) runs when
// its sha256 matches; other bytes, a failed fetch, a missing digest and
// both path and url are refused by key path.
func TestModuleFromURL(t *testing.T) {
	good := mustRead(t, buildWAT(t, t.TempDir(), "proxywasm", ""))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/pw.wasm" {
			http.NotFound(w, r)
			return
		}
		w.Write(good)
	}))
	defer srv.Close()
	settings := func(fs wasmfilter.FilterSettings) wasmfilter.Settings {
		fs.ABI = wasmfilter.ABIProxyWasm
		fs.Groups = []string{kernel.GroupProvider}
		return wasmfilter.Settings{Filters: map[string]wasmfilter.FilterSettings{"remote": fs}}
	}
	s := settings(wasmfilter.FilterSettings{URL: srv.URL + "/pw.wasm", SHA256: digest(good)})
	if errs := s.Validate(); len(errs) > 0 {
		t.Fatal(errs)
	}
	ds, err := s.Build(context.Background(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	f := ds[0].Filter
	defer f.Close()
	if _, err := f.Invoke(context.Background(), newEndpoint(), kernel.NewInvocation("sayHello")); err != nil {
		t.Fatal(err)
	}
	f.Watch(10) // a fetched module has no file to watch: a no-op
	for _, c := range []struct {
		name string
		fs   wasmfilter.FilterSettings
		want string
	}{
		{"other digest", wasmfilter.FilterSettings{URL: srv.URL + "/pw.wasm", SHA256: strings.Repeat("0", 64)}, "wasm.filters.remote: module " + srv.URL + "/pw.wasm has sha256 " + digest(good)},
		{"not found", wasmfilter.FilterSettings{URL: srv.URL + "/missing.wasm", SHA256: digest(good)}, "wasm.filters.remote.url: fetching the module: the server answered 404"},
	} {
		if _, err := settings(c.fs).Build(context.Background(), quiet); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	for _, c := range []struct {
		name string
		fs   wasmfilter.FilterSettings
		want string
	}{
		{"no digest", wasmfilter.FilterSettings{URL: srv.URL + "/pw.wasm"}, "wasm.filters.remote.sha256: required with url"},
		{"both", wasmfilter.FilterSettings{URL: srv.URL + "/pw.wasm", Path: filepath.Join(t.TempDir(), "x.wasm"), SHA256: digest(good)}, "both path and url are set"},
		{"scheme", wasmfilter.FilterSettings{URL: "ftp://example.com/x.wasm", SHA256: digest(good)}, "wasm.filters.remote.url: \"ftp://example.com/x.wasm\" is not an http:// or https:// URL"},
	} {
		errs := settings(c.fs).Validate()
		var all []string
		for _, e := range errs {
			all = append(all, e.Error())
		}
		if !strings.Contains(strings.Join(all, "\n"), c.want) {
			t.Errorf("%s: Validate said %q, want %q", c.name, all, c.want)
		}
	}
}
