// Command quickstart runs the Greeter as its config says. With weft.yaml the
// provider and its consumer share one App; with provider.yaml it serves until
// SIGINT/SIGTERM; with consumer.yaml it finds a provider process through the
// embedded registry. When the config has the greeter reference, it calls it a
// few times through both filter chains, prints the replies and exits.
//
//	go run ./apps/examples/quickstart -c apps/examples/quickstart/weft.yaml
//
//	go run ./apps/examples/quickstart -c apps/examples/quickstart/provider.yaml &
//	go run ./apps/examples/quickstart -c apps/examples/quickstart/consumer.yaml
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
	conf, err := weft.LoadConfig(append(weft.ConfigFiles(cfg...), weft.ConfigEnv())...)
	if err != nil {
		return err
	}
	_, consumer := conf.Consumer.References["greeter"]
	_, provider := conf.Provider.Services["greeter"]
	var client greeter.Client
	opts := []weft.Option{
		weft.WithConfig(weft.ConfigFiles(cfg...)...),
		weft.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
	}
	if provider {
		opts = append(opts, weft.WithService("greeter", greeter.Greeter{}))
	}
	if consumer {
		opts = append(opts, weft.WithReference("greeter", &client))
	}
	app, err := weft.New(opts...)
	if err != nil {
		return err
	}
	if !consumer {
		fmt.Fprintln(os.Stderr, "quickstart: serving the Greeter until interrupted")
		return app.Run(context.Background())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := app.Start(ctx); err != nil {
		return err
	}
	defer app.Stop(context.Background())
	// A provider found through a registry may take a moment to appear.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, err := client.SayHello(ctx, "probe"); err == nil {
			break
		}
	}

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
