// Command hostileprovider is the provider process of test/'s hostile-input
// tests: a provider App exporting org.weft.Str (echo(String)) from the YAML
// config in $WEFTTEST_HOSTILE_PROVIDER. It is a program of its own, built by
// the tests without the race detector whatever flags they run with, so that
// a crash takes down only it and its memory figures are those of a real
// provider.
//
// It prints "ready" once it serves and exits when its stdin closes (the test
// ended, whatever way). With WEFTTEST_HOSTILE_FREEMEM=1 it hands freed
// memory back to the OS every 200 ms, so that the test can tell from
// /proc whether memory is freed at all (the Go runtime would otherwise keep
// freed pages mapped for minutes).
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"time"

	"github.com/weftrpc/weft"
)

type strSvc struct{}

func (strSvc) Echo(_ context.Context, s string) (string, error) { return s, nil }

func main() {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	app, err := weft.New(weft.WithoutEnv(), weft.WithLogger(quiet), weft.WithService("str", strSvc{}),
		weft.WithConfig(weft.ConfigYAML(os.Getenv("WEFTTEST_HOSTILE_PROVIDER"))))
	if err == nil {
		err = app.Start(context.Background())
	}
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	if os.Getenv("WEFTTEST_HOSTILE_FREEMEM") == "1" {
		go func() {
			for range time.Tick(200 * time.Millisecond) {
				debug.FreeOSMemory()
			}
		}()
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}
