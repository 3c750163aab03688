// Package h2spec runs h2spec, the HTTP/2 conformance suite, against a weft
// Triple provider: every section, every case, each failure reported unless
// the case is listed below as not applying to a gRPC server, with why.
package h2spec

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/plugins/protocol/triple"
	"github.com/weftrpc/weft/proxy"
)

// notApplicable are the h2spec cases a gRPC server fails by design, by
// h2spec's id (section/case number), with the reason. Keep README.md's
// Triple section in step with it.
var notApplicable = map[string]string{
	"generic/2/2": "expects DATA, a body the server holds back until a WINDOW_UPDATE: a gRPC server answers h2spec's GET " +
		"with 405 as a trailers-only response (one HEADERS frame with END_STREAM), no body",
	"generic/2/3": "the same, with a PRIORITY frame before the WINDOW_UPDATE",
	"http2/5.1.2/1": "keeps each stream open by a zero window stalling its response body: a trailers-only 405 has none, " +
		"so every stream closes as it is answered and the limit is never reached (plugins/protocol/triple's " +
		"TestMaxConcurrentStreams checks REFUSED_STREAM with calls that stay open)",
}

// echo is the provider's one service: the path h2spec's requests name.
type echo struct{}

func (echo) Echo(_ context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	return in, nil
}

const iface = "org.weft.h2spec.Echo"

func TestH2spec(t *testing.T) {
	bin := h2specBinary(t)
	// The Triple protocol as an App exports it, on a port of its own.
	p := triple.New(slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(p.Destroy)
	iv, err := proxy.NewServiceInvoker(kernel.NewURL(triple.Name, "127.0.0.1", 0, iface, nil), echo{})
	if err != nil {
		t.Fatal(err)
	}
	exp, err := p.Export(context.Background(), iv)
	if err != nil {
		t.Fatal(err)
	}
	_, portText, _ := net.SplitHostPort(exp.(interface{ BoundAddr() string }).BoundAddr())
	port, _ := strconv.Atoi(portText)

	report := filepath.Join(t.TempDir(), "report.xml")
	// -o: each case's wait for an answer; the default 2 s is tight on a
	// loaded CI machine.
	cmd := exec.Command(bin, "-h", "127.0.0.1", "-p", strconv.Itoa(port), "-P", "/"+iface+"/Echo", "-o", "5", "-j", report)
	done := make(chan struct{})
	var out []byte
	go func() { out, _ = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("h2spec did not finish in 5 minutes:\n%s", out)
	}
	// h2spec exits 1 when a case fails: the report says which.
	cases, err := readReport(report)
	if err != nil {
		t.Fatalf("h2spec's report: %v\n%s", err, out)
	}
	var failed, passedNA, skips []string
	passed, skipped := 0, 0
	for _, c := range cases {
		_, na := notApplicable[c.id]
		switch {
		case c.failure != "" && !na:
			failed = append(failed, fmt.Sprintf("%s %s\n    %s", c.id, c.desc, strings.ReplaceAll(c.failure, "\n", "\n    ")))
		case c.failure == "" && !c.skipped && na:
			passedNA = append(passedNA, c.id+" "+c.desc)
		case c.skipped:
			skipped++
			skips = append(skips, c.id)
		case c.failure == "":
			passed++
		}
	}
	t.Logf("h2spec: %d cases, %d passed, %d skipped by h2spec (%s), %d not applicable", len(cases), passed, skipped,
		strings.Join(skips, " "), len(notApplicable))
	if len(cases) < 140 {
		t.Errorf("h2spec ran %d cases, want all 145 of its sections:\n%s", len(cases), out)
	}
	if len(failed) > 0 {
		t.Errorf("%d h2spec cases failed:\n%s", len(failed), strings.Join(failed, "\n"))
	}
	if len(passedNA) > 0 {
		t.Errorf("cases listed as not applicable pass now: take them off notApplicable (and README.md):\n%s", strings.Join(passedNA, "\n"))
	}
}

// h2specBinary builds h2spec, pinned by this module's tool directive.
func h2specBinary(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("go", "tool", "-n", "h2spec")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go tool -n h2spec: %v\n%s", err, stderr)
	}
	return strings.TrimSpace(string(out))
}

// result is one h2spec case.
type result struct {
	id, desc string
	failure  string
	skipped  bool
}

// readReport reads h2spec's JUnit report: a testsuite per section, whose
// testcases are its cases in order (h2spec's ids number them from 1).
func readReport(path string) ([]result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r struct {
		Suites []struct {
			Package string `xml:"package,attr"`
			Cases   []struct {
				Desc  string `xml:"classname,attr"`
				Error *struct {
					Text string `xml:",chardata"`
				} `xml:"error"`
				FailureText *struct {
					Text string `xml:",chardata"`
				} `xml:"failure"`
				Skipped *struct{} `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	// The report quotes frames' bytes (PING data has NULs), which XML
	// 1.0 does not allow.
	for i, c := range b {
		if c < 0x20 && c != '\t' && c != '\n' && c != '\r' {
			b[i] = ' '
		}
	}
	if err := xml.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	var out []result
	for _, s := range r.Suites {
		for i, c := range s.Cases {
			res := result{id: fmt.Sprintf("%s/%d", s.Package, i+1), desc: c.Desc, skipped: c.Skipped != nil}
			switch {
			case c.FailureText != nil:
				res.failure = strings.TrimSpace(c.FailureText.Text)
				if res.failure == "" {
					res.failure = "(no detail)"
				}
			case c.Error != nil:
				res.failure = strings.TrimSpace(c.Error.Text)
				if res.failure == "" {
					res.failure = "(no detail)"
				}
			}
			out = append(out, res)
		}
	}
	return out, nil
}
