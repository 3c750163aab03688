package interop_test

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/dubbo-go-hessian2/java8_time"
	gxbig "github.com/dubbogo/gost/math/big"

	"github.com/weftrpc/weft/plugins/serialization/hessian2"
)

// TestJavaTypesDecodeIntoTheLibrarys: what Java writes for types that
// apache/dubbo-go-hessian2 knows natively (java.time as Dubbo's hessian-lite
// writes it, BigDecimal as hessian-lite's string value, BigInteger,
// HashSet, java.lang.IllegalArgumentException), written by Caucho's Hessian
// in a JVM (java/HessianSamples.java), decodes through weft's hessian2 —
// check, then the library — into the library's Go types.
func TestJavaTypesDecodeIntoTheLibrarys(t *testing.T) {
	cmd := javaSamples(t)
	out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("HessianSamples: %v\n%s", err, out)
	}
	samples := map[string][]byte{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		name, h, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		b, err := hex.DecodeString(h)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		samples[name] = b
	}
	for _, c := range []struct {
		name, typ string
		check     func(v any) string // what it reads back, compared with want
		want      string
	}{
		{"LocalDateTime", "*java8_time.LocalDateTime", func(v any) string {
			// Fields by hand: the types have an Error method, which %v prints.
			d, tm := v.(*java8_time.LocalDateTime).Date, v.(*java8_time.LocalDateTime).Time
			return fmt.Sprintf("%d-%d-%d %d:%d:%d.%d", d.Year, d.Month, d.Day, tm.Hour, tm.Minute, tm.Second, tm.Nano)
		}, "2026-12-2 8:30:15.123456789"},
		// gost's decimal and integer, which the library decodes them into.
		{"BigDecimal", "*gxbig.Decimal", func(v any) string { return v.(*gxbig.Decimal).String() }, "12345678901234567890.0123456789"},
		{"BigInteger", "*gxbig.Integer", func(v any) string { return fmt.Sprint(v) }, "-98765432109876543210"},
		// A typed list of a class the library has no type for: its []any.
		{"HashSet", "[]interface {}", func(v any) string { return fmt.Sprint(len(v.([]any))) }, "3"},
		{"IllegalArgumentException", "*java_exception.IllegalArgumentException", func(v any) string {
			th, ok := v.(hessian2.Throwable)
			if !ok {
				return "not a Throwable"
			}
			return th.JavaClassName() + ": " + hessian2.ExceptionError(v).Error()
		}, "java.lang.IllegalArgumentException: java.lang.IllegalArgumentException: amount must be positive"},
	} {
		data, ok := samples[c.name]
		if !ok {
			t.Fatalf("no %s sample in:\n%s", c.name, out)
		}
		v, err := hessian2.NewDecoder(data).Decode()
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got := fmt.Sprintf("%T", v); got != c.typ {
			t.Errorf("%s decoded as %s %#v, want %s", c.name, got, v, c.typ)
			continue
		}
		if c.check != nil {
			if got := c.check(v); got != c.want {
				t.Errorf("%s reads back %q, want %q", c.name, got, c.want)
			}
		}
	}
}

// javaSamples compiles HessianSamples (and the hessian-lite handle classes it
// writes) and returns the command line that runs it.
func javaSamples(t *testing.T) []string {
	t.Helper()
	peer := javaPeer(t) // java, its flags, -cp classes:jar, DubboPeer
	java, jar := peer[0], os.Getenv("HESSIAN_JAR")
	if jar == "" {
		jar = hessianJar
	}
	javac, err := exec.LookPath("javac")
	if err != nil {
		t.Fatal(err)
	}
	classes := t.TempDir()
	srcs := []string{filepath.Join("java", "HessianSamples.java")}
	handles, _ := filepath.Glob(filepath.Join("java", "com", "alibaba", "com", "caucho", "hessian", "io", "java8", "*.java"))
	srcs = append(srcs, handles...)
	if out, err := exec.Command(javac, append([]string{"-Xlint:all,-path", "-Werror", "-cp", jar, "-d", classes}, srcs...)...).CombinedOutput(); err != nil {
		t.Fatalf("javac HessianSamples: %v\n%s", err, out)
	}
	return []string{java, "--add-opens", "java.base/java.lang=ALL-UNNAMED", "--add-opens", "java.base/java.util=ALL-UNNAMED",
		"--add-opens", "java.base/java.math=ALL-UNNAMED", "-cp", classes + string(os.PathListSeparator) + jar, "HessianSamples"}
}
