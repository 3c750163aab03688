package oracle

import (
	"io"
	"strings"
	"testing"

	hessian "github.com/apache/dubbo-go-hessian2"
)

// The library's figures for the body of the core's BenchmarkMarshal and
// BenchmarkDecode, to set weft's against.
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

func BenchmarkLibraryMarshal(b *testing.B) {
	body := benchBody()
	b.ReportAllocs()
	for b.Loop() {
		e := hessian.NewEncoder()
		for _, v := range body {
			if err := e.Encode(v); err != nil {
				b.Fatal(err)
			}
		}
		b.SetBytes(int64(len(e.Buffer())))
	}
}

func BenchmarkLibraryDecode(b *testing.B) {
	data := libEncode(b, benchBody()...)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		d := hessian.NewDecoder(data)
		for {
			if _, err := d.Decode(); err != nil {
				if err != io.EOF {
					b.Fatal(err)
				}
				break
			}
		}
	}
}
