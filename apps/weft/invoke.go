package main

import (
	"bytes"
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

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/kernel/view"
	"github.com/weftrpc/weft/plugins/protocol/dubbo"
	"github.com/weftrpc/weft/plugins/protocol/triple"
	"github.com/weftrpc/weft/proxy"
)

// invoke makes one generic call and prints its result as JSON.
func invoke(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("invoke", flag.ContinueOnError)
	fs.SetOutput(stderr)
	timeout := fs.Duration("timeout", 3*time.Second, "call timeout")
	types := fs.String("types", "", "comma-separated Java parameter types (default: inferred from the JSON arguments)")
	group := fs.String("group", "", "service group")
	version := fs.String("version", "", "service version")
	var cfgFiles files
	fs.Var(&cfgFiles, "c", "consumer config file (repeatable): call through its reference named by the first argument")
	attachments := map[string]any{}
	fs.Func("a", "an attachment `key=value` to send (repeatable)", func(kv string) error {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("want key=value, got %q", kv)
		}
		attachments[k] = v
		return nil
	})
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: weft invoke [flags] dubbo|tri://HOST:PORT/INTERFACE METHOD '[JSON ARGS]'
       weft invoke [flags] embedded|zookeeper|nacos://REGISTRY INTERFACE METHOD '[JSON ARGS]'
       weft invoke [flags] -c consumer.yaml [-c ...] REFERENCE METHOD '[JSON ARGS]'

The first form calls one provider. The other two call through a reference, as an App
does: the registry's providers, or those of a reference of the config files, with its
cluster, load balancer, routers and consumer filters (QoS is off for the call).
METHOD is called generically ($invoke), or $echo directly: weft invoke URL '$echo' '["ping"]'.
A POJO argument is a JSON object with its Java class under "class", which is also
its parameter type unless -types says otherwise: '[{"class":"org.example.User","id":1}]'.
The result is printed as JSON on stdout; attachments the provider sent back, on stderr.`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	// The reference forms take the target in one or two arguments: the
	// method and its arguments follow.
	pos := fs.Args()
	var target invokeTarget
	switch {
	case len(cfgFiles) > 0:
		if len(pos) < 2 {
			fs.Usage()
			return 2
		}
		target = invokeTarget{files: cfgFiles, ref: pos[0]}
		pos = pos[1:]
	case len(pos) >= 1 && registryScheme(pos[0]):
		if len(pos) < 3 {
			fs.Usage()
			return 2
		}
		target = invokeTarget{registry: pos[0], iface: pos[1]}
		pos = pos[2:]
	default:
		if len(pos) < 2 {
			fs.Usage()
			return 2
		}
		target = invokeTarget{direct: pos[0]}
		pos = pos[1:]
	}
	if len(pos) < 1 || len(pos) > 2 {
		fs.Usage()
		return 2
	}
	method := pos[0]
	var callArgs []any
	if len(pos) == 2 {
		var err error
		if callArgs, err = proxy.JSONArgs(pos[1]); err != nil {
			fmt.Fprintf(stderr, "weft invoke: arguments must be a JSON array: %v\n", err)
			return 2
		}
	}
	var typeList []string
	if *types != "" {
		typeList = strings.Split(*types, ",")
	} else {
		for _, a := range callArgs {
			typeList = append(typeList, javaType(a))
		}
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	ctx, cancel := context.WithTimeout(context.Background(), *timeout+refStartWait)
	defer cancel()
	iv, closeFn, code := target.invoker(ctx, log, *group, *version, *timeout, stderr)
	if iv == nil {
		return code
	}
	defer closeFn()
	ctx, cancel = context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	var inv *kernel.Invocation
	if method == kernel.MethodEcho {
		// $echo is answered by the provider's echo filter itself.
		if len(callArgs) != 1 {
			fmt.Fprintln(stderr, "weft invoke: $echo takes one argument: '[\"ping\"]'")
			return 2
		}
		inv = kernel.NewInvocation(method, callArgs...)
		inv.ParamTypes = "Ljava/lang/Object;"
	} else {
		inv = proxy.GenericInvocation(method, typeList, callArgs)
	}
	for k, v := range attachments {
		inv.SetAttachment(k, v)
	}
	res, err := iv.Invoke(ctx, inv)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if len(res.Attachments) > 0 {
		if b, err := json.Marshal(view.JSONWith(res.Attachments, printLimits)); err == nil {
			fmt.Fprintf(stderr, "attachments: %s\n", b)
		}
	}
	// The result crossed the wire: view bounds the walk (cycles print as
	// "(cycle)") while keeping strings whole.
	out, err := json.Marshal(view.JSONWith(res.Value, printLimits))
	if err != nil {
		fmt.Fprintf(stderr, "weft invoke: result %T is not printable as JSON: %v\n", res.Value, err)
		return 1
	}
	var pretty bytes.Buffer
	json.Indent(&pretty, out, "", "  ")
	fmt.Fprintln(stdout, pretty.String())
	return 0
}

// refStartWait bounds the start of an App that weft invoke calls through:
// its registries' first lists, a reference's check (3 s).
const refStartWait = 10 * time.Second

// invokeTarget is what weft invoke calls: one provider's URL (direct), an
// interface through a registry, or a reference of config files.
type invokeTarget struct {
	direct          string
	registry, iface string
	files           files
	ref             string
}

// registryScheme tells a registry's URL (a registry extension weft run
// carries) from a provider's.
func registryScheme(raw string) bool {
	scheme, _, ok := strings.Cut(raw, "://")
	return ok && (scheme == "embedded" || scheme == "zookeeper" || scheme == "nacos")
}

// invoker returns the invoker to call and what releases it; nil and the
// exit code when it cannot.
func (t invokeTarget) invoker(ctx context.Context, log *slog.Logger, group, version string, timeout time.Duration, stderr io.Writer) (kernel.Invoker, func(), int) {
	if t.direct != "" {
		return directInvoker(ctx, log, t.direct, group, version, timeout, stderr)
	}
	ref := t.ref
	var sources []weft.ConfigSource
	if t.registry != "" {
		// One reference to the interface, through the registry.
		ref = "target"
		sources = append(sources, weft.ConfigYAML(fmt.Sprintf(`application: {name: weft-invoke}
registries: {r: {address: %q}}
consumer: {references: {target: {interface: %q, group: %q, version: %q, timeout: %d}}}
`, t.registry, t.iface, group, version, timeout.Milliseconds())))
	} else {
		sources = weft.ConfigFiles(t.files...)
		if group != "" || version != "" {
			fmt.Fprintln(stderr, "weft invoke: -group and -version name a service by URL; with -c the reference's own apply")
			return nil, nil, 2
		}
		// Only the reference called must have a provider: the others
		// start without (check: false).
		cfg, err := weft.LoadConfig(sources...)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return nil, nil, 1
		}
		var others strings.Builder
		for id := range cfg.Consumer.References {
			if id != ref {
				fmt.Fprintf(&others, "%q: {check: false}, ", id)
			}
		}
		sources = append(sources, weft.ConfigYAML("consumer: {references: {"+others.String()+"}}"))
	}
	// A one-shot caller: no QoS port to collide with the App it calls.
	sources = append(sources, weft.ConfigYAML("qos: {enable: false}"))
	app, err := weft.New(weft.WithPlugins(builtinPlugins()...), weft.WithLogger(log), weft.WithConfig(sources...))
	if err != nil {
		fmt.Fprintln(stderr, err)
		return nil, nil, 1
	}
	if _, ok := app.Config().Consumer.References[ref]; !ok {
		fmt.Fprintf(stderr, "weft invoke: the config has no reference %q (references: %s)\n", ref,
			strings.Join(slices.Sorted(maps.Keys(app.Config().Consumer.References)), ", "))
		return nil, nil, 2
	}
	if err := app.Start(ctx); err != nil {
		fmt.Fprintln(stderr, err)
		return nil, nil, 1
	}
	stop := func() { app.Stop(context.Background()) }
	iv, err := app.Reference(ref)
	if err != nil {
		stop()
		fmt.Fprintln(stderr, err)
		return nil, nil, 1
	}
	return iv, stop, 0
}

// directInvoker refers one provider by its URL, with no App around it.
func directInvoker(ctx context.Context, log *slog.Logger, raw, group, version string, timeout time.Duration, stderr io.Writer) (kernel.Invoker, func(), int) {
	u, err := kernel.ParseURL(raw)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return nil, nil, 2
	}
	if u.Path == "" {
		fmt.Fprintln(stderr, "weft invoke: the URL needs the interface as its path: dubbo://127.0.0.1:20880/org.example.Greeter")
		return nil, nil, 2
	}
	params := map[string]string{kernel.KeyInterface: u.Path}
	if group != "" {
		params[kernel.KeyGroup] = group
	}
	if version != "" {
		params[kernel.KeyVersion] = version
	}
	params[kernel.KeyTimeout] = fmt.Sprint(timeout.Milliseconds())
	u = u.WithParams(params)
	var p extension.Protocol
	switch u.Protocol {
	case dubbo.Name:
		p = dubbo.New(log)
	case triple.Name:
		// Generic calls travel as non-IDL ones (hessian2 in Triple's
		// wrapper), as Dubbo 3 sends them.
		p = triple.New(log)
	default:
		fmt.Fprintf(stderr, "weft invoke: protocol %q: want dubbo://, tri://, or a registry's URL (embedded, zookeeper, nacos) and an interface\n", u.Protocol)
		return nil, nil, 2
	}
	iv, err := p.Refer(ctx, u)
	if err != nil {
		p.Destroy()
		fmt.Fprintln(stderr, err)
		return nil, nil, 1
	}
	return iv, func() { iv.Destroy(); p.Destroy() }, 0
}

// printLimits: a result prints whole up to 64 MiB of text and a million
// values.
var printLimits = view.Limits{MaxDepth: 1000, MaxNodes: 1 << 20, MaxBytes: 64 << 20}

// javaType infers the Java parameter type of a JSON argument.
func javaType(v any) string {
	switch x := v.(type) {
	case string:
		return "java.lang.String"
	case int64:
		return "long"
	case float64:
		return "double"
	case bool:
		return "boolean"
	case []any:
		return "java.util.List"
	case map[string]any:
		if c, ok := x["class"].(string); ok {
			return c
		}
		return "java.util.Map"
	}
	return "java.lang.Object"
}
