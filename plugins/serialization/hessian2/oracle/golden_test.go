package oracle

import (
	"flag"
	"path/filepath"
	"testing"

	"github.com/weftrpc/weft/plugins/serialization/hessian2/internal/h2test"
)

var update = flag.Bool("update", false, "rewrite the core's golden file from the library")

var goldenPath = filepath.Join("..", "testdata", h2test.GoldenFile)

// libraryGolden is what the library writes and decodes for the golden cases.
func libraryGolden(t *testing.T) h2test.Golden {
	g := h2test.Golden{}
	for _, c := range h2test.MarshalCases(side) {
		g.Set(c.Name, "bytes", h2test.BytesPayload(libEncode(t, c.Values...)))
	}
	for _, c := range h2test.DecodeCases(side) {
		data := c.Data
		if data == nil {
			data = libEncode(t, c.Values...)
		}
		vals, err := libDecodeAll(data)
		g.Set(c.Name, "dump", h2test.DumpPayload(h2test.DumpValues(vals, err)))
	}
	return g
}

// TestGolden: the core's golden file is what the library gives (with
// -update, it is rewritten from the library).
func TestGolden(t *testing.T) {
	want := libraryGolden(t)
	if *update {
		if err := want.Write(goldenPath); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := h2test.ReadGolden(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	for name, kinds := range want {
		for kind, p := range kinds {
			if got[name][kind] != p {
				t.Errorf("%s %s: golden %.80s, the library gives %.80s (go test -run TestGolden -update)", name, kind, got[name][kind], p)
			}
		}
	}
	for name := range got {
		if want[name] == nil {
			t.Errorf("%s: in the golden file, not a case (go test -run TestGolden -update)", name)
		}
	}
}
