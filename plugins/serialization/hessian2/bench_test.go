package hessian2

import (
	"io"
	"strings"
	"testing"
)

// The library's figures for the same bodies: BenchmarkMarshal and
// BenchmarkDecode in the oracle module.

// benchBody is a typical Dubbo request body: version, path, service version,
// method, descriptor, one 1 KiB string argument, attachments.
func benchBody() []any {
	return []any{
		"2.0.2", "org.weft.bench.EchoService", "", "echo", "Ljava/lang/String;",
		strings.Repeat("0123456789abcdef", 64),
		map[string]any{
			"path":      "org.weft.bench.EchoService",
			"interface": "org.weft.bench.EchoService",
			"version":   "",
			"timeout":   "1000",
		},
	}
}

func BenchmarkMarshal(b *testing.B) {
	body := benchBody()
	b.Run("fast", func(b *testing.B) {
		s := New()
		buf := make([]byte, 0, 4096)
		b.ReportAllocs()
		for b.Loop() {
			out, err := s.Marshal(buf[:0], body...)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(out)))
		}
	})
}

func BenchmarkDecode(b *testing.B) {
	data := marshal(b, benchBody()...)
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			d := NewDecoder(data)
			for {
				if _, err := d.Decode(); err != nil {
					if err != io.EOF {
						b.Fatal(err)
					}
					break
				}
			}
		}
	})
}
