package hessian2

import (
	"encoding/hex"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weftrpc/weft/plugins/serialization/hessian2/internal/h2test"
)

// The golden tests check this package against dubbo-go-hessian2 without
// running it: testdata/golden.txt holds the bytes the library wrote and the
// values (as h2test.Dump) it decoded for the cases in h2test, captured with
// the library v1.12.5 by the oracle module, which checks on every run that
// the library still gives them.

func readGolden(t *testing.T) h2test.Golden {
	t.Helper()
	g, err := h2test.ReadGolden(filepath.Join("testdata", h2test.GoldenFile))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func goldenEntry(t *testing.T, g h2test.Golden, name, kind string) string {
	t.Helper()
	p, ok := g[name][kind]
	if !ok {
		t.Fatalf("%s: no golden %s (regenerate: see testdata/%s)", name, kind, h2test.GoldenFile)
	}
	return p
}

// TestGoldenMarshal: Marshal writes the library's bytes, exactly: every
// compact form's boundaries, back references, random nested fast values,
// objects, enums and exceptions.
func TestGoldenMarshal(t *testing.T) {
	g := readGolden(t)
	for _, c := range h2test.MarshalCases(side) {
		got := marshal(t, c.Values...)
		want := goldenEntry(t, g, c.Name, "bytes")
		if h2test.BytesPayload(got) == want {
			continue
		}
		if wb, err := hex.DecodeString(want); err == nil {
			mustEqualBytes(t, c.Name, got, wb)
		}
		t.Fatalf("%s: %d bytes, not the library's (%s)", c.Name, len(got), want)
	}
}

// TestGoldenDecode: Decode returns what the library returns, by shape (the
// types' names, not their packages), but where DecodeDiffers says why not;
// and a random stream that Marshal wrote decodes as the library decodes the
// library's encoding of it.
func TestGoldenDecode(t *testing.T) {
	g := readGolden(t)
	for _, c := range h2test.DecodeCases(side) {
		data := c.Data
		if data == nil {
			data = marshal(t, c.Values...)
		}
		vals, _, err := decodeAll(data)
		dump := h2test.DumpValues(vals, err)
		want := goldenEntry(t, g, c.Name, "dump")
		if d, ok := h2test.DecodeDiffers[c.Name]; ok {
			if dump != d.Dump {
				t.Errorf("%s: decoded %s, want %s (%s)", c.Name, dump, d.Dump, d.Why)
			}
			continue
		}
		if got := h2test.DumpPayload(dump); got != want {
			if len(dump) > 300 {
				dump = dump[:300] + "..."
			}
			if strings.HasPrefix(want, "sha256:") {
				t.Errorf("%s: decoded %s, not what the library decoded (%s)", c.Name, dump, want)
			} else {
				t.Errorf("%s: decoded %s\nthe library: %s", c.Name, dump, want)
			}
		}
	}
}
