package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	var out, errb bytes.Buffer
	if code := cli([]string{"version"}, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "weft 0.") {
		t.Fatalf("version: code %d, out %q, err %q", code, out.String(), errb.String())
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(cfg, []byte("consumer:\n  loadbalance: nosuch\n"), 0o644)
	var out, errb bytes.Buffer
	code := cli([]string{"run", "-c", cfg}, &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), `consumer.loadbalance: unknown loadbalance extension "nosuch" (known: adaptive, consistenthash, leastactive, p2c, random, roundrobin, shortestresponse)`) {
		t.Fatalf("code %d, stderr %q", code, errb.String())
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{nil, {"frobnicate"}, {"run"}} {
		var out, errb bytes.Buffer
		if code := cli(args, &out, &errb); code != 2 || errb.Len() == 0 {
			t.Errorf("%v: code %d, stderr %q; want 2 and a message", args, code, errb.String())
		}
	}
}
