// Command quickstart runs a Greeter provider and its consumer in one App, calls
// it a few times through both filter chains, prints the replies and exits.
//
//	go run ./apps/examples/quickstart -c apps/examples/quickstart/weft.yaml
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/apps/examples/quickstart/greeter"
	"github.com/weftrpc/weft/kernel"
)

type files []string

func (f *files) String() string     { return strings.Join(*f, ",") }
func (f *files) Set(s string) error { *f = append(*f, s); return nil }

func main() {
	var cfg files
	flag.Var(&cfg, "c", "config file (repeat to merge several, in order)")
	flag.Parse()
	if len(cfg) == 0 {
		cfg = files{"apps/examples/quickstart/weft.yaml"}
	}
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(cfg []string) error {
	var client greeter.Client
	app, err := weft.New(
		weft.WithConfig(weft.ConfigFiles(cfg...)...),
		weft.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
		weft.WithService("greeter", greeter.Greeter{}),
		weft.WithReference("greeter", &client),
	)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := app.Start(ctx); err != nil {
		return err
	}
	defer app.Stop(context.Background())

	for _, name := range []string{"world", "weft", "dubbo"} {
		reply, err := client.SayHello(ctx, name)
		if err != nil {
			return err
		}
		fmt.Println(reply)
	}
	fr := kernel.WithAttachments(ctx, map[string]any{"lang": "fr"})
	reply, err := client.SayHello(fr, "le monde")
	if err != nil {
		return err
	}
	fmt.Println(reply)
	if _, err := client.SayHello(ctx, ""); err != nil {
		fmt.Printf("business error, as expected: %v (biz=%t)\n", err, kernel.IsBiz(err))
	}
	echo, err := client.Echo(ctx, "ping")
	if err != nil {
		return err
	}
	fmt.Println("$echo:", echo)
	return app.Stop(ctx)
}
