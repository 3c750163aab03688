package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/weftrpc/weft"
)

// weft qos runs a command on a running App's QoS port: its answer on
// stdout, exit 0 on 200 and 1 otherwise (a false probe, an unknown
// command, nothing listening).
func TestQoSCommand(t *testing.T) {
	app, err := weft.New(weft.WithoutEnv(), weft.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		weft.WithService("greeter", langGreeter{}),
		weft.WithConfig(weft.ConfigYAML(`
qos: {port: 0}
registries: {local: {address: "embedded://`+t.TempDir()+`"}}
protocols: {dubbo: {port: 0}}
provider:
  services:
    greeter: {interface: org.weft.Greeter}
`)))
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer app.Stop(context.Background())
	addr := app.QoSAddr()
	_, port, _ := net.SplitHostPort(addr)
	for _, c := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{addr, "ready"}, 0, "true"},
		{[]string{port, "ls"}, 0, "org.weft.Greeter"},
		{[]string{addr, "offline", "org.weft.Greeter"}, 0, "offline: org.weft.Greeter"},
		{[]string{addr, "ready"}, 1, "false: offline"},
		{[]string{addr, "online", "greeter"}, 0, "OK"},
		{[]string{addr, "frobnicate"}, 1, `unknown command "frobnicate"`},
	} {
		var out, errb bytes.Buffer
		if code := cli(append([]string{"qos"}, c.args...), &out, &errb); code != c.code || !strings.Contains(out.String(), c.out) {
			t.Errorf("weft qos %v: code %d, stdout %q, stderr %q; want %d with %q", c.args, code, out.String(), errb.String(), c.code, c.out)
		}
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	var out, errb bytes.Buffer
	if code := cli([]string{"qos", dead, "ls"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "cannot reach the QoS port") {
		t.Errorf("nothing listening: code %d, stderr %q", code, errb.String())
	}
	for _, args := range [][]string{{"qos"}, {"qos", addr}, {"qos", "a:b:c", "ls"}} {
		var out, errb bytes.Buffer
		if code := cli(args, &out, &errb); code != 2 || errb.Len() == 0 {
			t.Errorf("%v: code %d, stderr %q; want 2 and a message", args, code, errb.String())
		}
	}
	errb.Reset()
	if code := cli([]string{"qos", "-h"}, &out, &errb); code != 0 || !strings.Contains(errb.String(), "usage: weft qos") {
		t.Errorf("-h: code %d, stderr %q", code, errb.String())
	}
}
