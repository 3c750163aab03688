package h2

import (
	"bytes"
	"testing"

	"golang.org/x/net/http2/hpack"
)

// FuzzHPACK decodes the same header blocks (two in a row, sharing the
// dynamic table) with weft's decoder and x/net's, which must agree on
// every field and on whether a block is valid.
func FuzzHPACK(f *testing.F) {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	for _, kv := range [][2]string{{":method", "POST"}, {":path", "/a.B/C"}, {"content-type", "application/grpc"},
		{"x-custom", "value"}, {"x-bin-bin", "AAEC"}, {"grpc-timeout", "100m"}} {
		enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	first := append([]byte(nil), buf.Bytes()...)
	buf.Reset()
	enc.WriteField(hpack.HeaderField{Name: ":path", Value: "/a.B/C"})
	enc.WriteField(hpack.HeaderField{Name: "x-custom", Value: "value"})
	enc.SetMaxDynamicTableSize(100)
	enc.WriteField(hpack.HeaderField{Name: "x-other", Value: "v2", Sensitive: true})
	f.Add(first, append([]byte(nil), buf.Bytes()...))
	f.Add(AppendField(AppendField(nil, ":status", "200"), "grpc-status", "0"), []byte{0x3f, 0xe1, 0x1f})
	f.Add([]byte{0x82, 0x86, 0x84}, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		const maxStr = 1 << 12
		theirs := hpack.NewDecoder(4096, nil)
		theirs.SetMaxStringLength(maxStr)
		ours := NewDecoder(4096, maxStr)
		for i, block := range [][]byte{a, b} {
			want, werr := theirs.DecodeFull(block)
			var got []hpack.HeaderField
			gerr := ours.Decode(block, func(f hpack.HeaderField) { got = append(got, f) })
			if (werr == nil) != (gerr == nil) {
				t.Fatalf("block %d %x: x/net says %v, weft says %v", i, block, werr, gerr)
			}
			if werr != nil {
				return // the table may differ after a broken block: stop here
			}
			if len(got) != len(want) {
				t.Fatalf("block %d: %d fields, x/net %d", i, len(got), len(want))
			}
			for j := range got {
				if got[j].Name != want[j].Name || got[j].Value != want[j].Value {
					t.Fatalf("block %d field %d: %q: %q, x/net %q: %q", i, j, got[j].Name, got[j].Value, want[j].Name, want[j].Value)
				}
			}
		}
	})
}

// TestHPACKWarmConnectionAllocatesNothing: once a connection's strings
// are cached, decoding weft's literal headers allocates nothing.
func TestHPACKWarmConnectionAllocatesNothing(t *testing.T) {
	var block []byte
	for _, kv := range [][2]string{{":path", "/a.B/C"}, {"content-type", "application/grpc+proto"}, {"te", "trailers"},
		{"user-agent", "weft-triple"}, {"grpc-timeout", "2999m"}, {"x-user", "ann"}} {
		block = AppendField(block, kv[0], kv[1])
	}
	d := NewDecoder(4096, 1<<14)
	fields := make([]hpack.HeaderField, 0, 16)
	emit := func(f hpack.HeaderField) { fields = append(fields, f) }
	if err := d.Decode(block, emit); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() {
		fields = fields[:0]
		d.Decode(block, emit)
	}); n != 0 {
		t.Fatalf("%v allocations per block", n)
	}
}
