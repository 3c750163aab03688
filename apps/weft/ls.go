package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/plugins/registry/embedded"
	nacos "github.com/weftrpc/weft/registry-nacos"
	zookeeper "github.com/weftrpc/weft/registry-zookeeper"
)

// registryFactories are the registries `weft ls` can read, by URL scheme.
func registryFactories(log *slog.Logger) map[string]extension.RegistryFactory {
	return map[string]extension.RegistryFactory{
		embedded.Name:  &embedded.Factory{Log: log},
		nacos.Name:     nacos.Factory{Log: log},
		zookeeper.Name: zookeeper.Factory{Log: log},
	}
}

// ls lists what a registry holds: each service with its providers.
func ls(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ls", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print {service: [provider URL, ...]} as JSON")
	timeout := fs.Duration("timeout", 10*time.Second, "give up after this long")
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: weft ls [-json] [-timeout 10s] REGISTRY_URL

Lists every service the registry holds and its live providers, as a
consumer would find them:

  weft ls embedded:///tmp/weft-registry
  weft ls nacos://127.0.0.1:8848?namespace=dev
  weft ls zookeeper://127.0.0.1:2181

Flags:`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	u, err := kernel.ParseURL(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "weft ls: %q is not a registry URL: %v\n", fs.Arg(0), err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	factories := registryFactories(log)
	f, ok := factories[u.Protocol]
	if !ok {
		known := slices.Sorted(maps.Keys(factories))
		fmt.Fprintf(stderr, "weft ls: unknown registry %q (known: %s)\n", u.Protocol, strings.Join(known, ", "))
		return 2
	}
	reg, err := f.GetRegistry(u)
	if err != nil {
		fmt.Fprintf(stderr, "weft ls: %s: %v\n", u, err)
		return 1
	}
	defer reg.Close()
	cat, ok := reg.(extension.Catalog)
	if !ok {
		fmt.Fprintf(stderr, "weft ls: the %s registry cannot list its services\n", u.Protocol)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	all, err := cat.Providers(ctx)
	code := 0
	if err != nil {
		// What could be read is still printed; the error says what is
		// missing.
		fmt.Fprintf(stderr, "weft ls: %s: %v\n", u, err)
		code = 1
		if len(all) == 0 {
			return code
		}
	}
	keys := slices.Sorted(maps.Keys(all))
	if *asJSON {
		out := make(map[string][]string, len(all))
		for _, k := range keys {
			for _, p := range all[k] {
				out[k] = append(out[k], p.String())
			}
		}
		b, _ := json.MarshalIndent(out, "", "  ")
		fmt.Fprintln(stdout, string(b))
		return code
	}
	if len(keys) == 0 {
		fmt.Fprintln(stdout, "(no providers)")
		return code
	}
	for _, k := range keys {
		fmt.Fprintf(stdout, "%s  (%d providers)\n", k, len(all[k]))
		for _, p := range all[k] {
			line := "  " + p.Protocol + "://" + p.Address()
			for _, key := range []string{kernel.KeyApplication, kernel.KeyVersion, kernel.KeyGroup, kernel.KeyMethods} {
				if v := p.Param(key); v != "" {
					line += "  " + key + "=" + v
				}
			}
			fmt.Fprintln(stdout, line)
		}
	}
	return code
}
