package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

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

METHOD is called generically ($invoke), or $echo directly: weft invoke URL '$echo' '["ping"]'.
A POJO argument is a JSON object with its Java class under "class", which is also
its parameter type unless -types says otherwise: '[{"class":"org.example.User","id":1}]'.
The result is printed as JSON on stdout; attachments the provider sent back, on stderr.`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() < 2 || fs.NArg() > 3 {
		fs.Usage()
		return 2
	}
	u, err := kernel.ParseURL(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if u.Path == "" {
		fmt.Fprintln(stderr, "weft invoke: the URL needs the interface as its path: dubbo://127.0.0.1:20880/org.example.Greeter")
		return 2
	}
	var callArgs []any
	if fs.NArg() == 3 {
		d := json.NewDecoder(strings.NewReader(fs.Arg(2)))
		d.UseNumber()
		if err := d.Decode(&callArgs); err != nil {
			fmt.Fprintf(stderr, "weft invoke: arguments must be a JSON array: %v\n", err)
			return 2
		}
	}
	for i := range callArgs {
		callArgs[i] = fromJSON(callArgs[i])
	}
	var typeList []string
	if *types != "" {
		typeList = strings.Split(*types, ",")
	} else {
		for _, a := range callArgs {
			typeList = append(typeList, javaType(a))
		}
	}
	params := map[string]string{kernel.KeyInterface: u.Path}
	if *group != "" {
		params[kernel.KeyGroup] = *group
	}
	if *version != "" {
		params[kernel.KeyVersion] = *version
	}
	params[kernel.KeyTimeout] = fmt.Sprint(timeout.Milliseconds())
	u = u.WithParams(params)
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	var p extension.Protocol
	switch u.Protocol {
	case dubbo.Name:
		p = dubbo.New(log)
	case triple.Name:
		// Generic calls travel as non-IDL ones (hessian2 in Triple's
		// wrapper), as Dubbo 3 sends them.
		p = triple.New(log)
	default:
		fmt.Fprintf(stderr, "weft invoke: protocol %q: want dubbo:// or tri://\n", u.Protocol)
		return 2
	}
	defer p.Destroy()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	iv, err := p.Refer(ctx, u)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer iv.Destroy()
	var inv *kernel.Invocation
	if method := fs.Arg(1); method == kernel.MethodEcho {
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

// printLimits: a result prints whole up to 64 MiB of text and a million
// values.
var printLimits = view.Limits{MaxDepth: 1000, MaxNodes: 1 << 20, MaxBytes: 64 << 20}

func fromJSON(v any) any {
	switch x := v.(type) {
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
		f, _ := x.Float64()
		return f
	case []any:
		for i := range x {
			x[i] = fromJSON(x[i])
		}
		return x
	case map[string]any:
		for k := range x {
			x[k] = fromJSON(x[k])
		}
		return x
	}
	return v
}

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
