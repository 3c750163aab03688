package weft_test

import (
	"context"
	"strings"
	"testing"

	"github.com/weftrpc/weft/kernel"
)

// tracing.* values are checked at weft.New, with the key path and the fix,
// whether tracing is on or not.
func TestTracingConfigErrors(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"probability above 1", `tracing: {sampling: {probability: 1.5}}`,
			[]string{"tracing.sampling.probability: 1.5 is not allowed", "0..1"}},
		{"negative probability", `tracing: {enable: true, exporter: {type: none}, sampling: {probability: -0.1}}`,
			[]string{"tracing.sampling.probability: -0.1 is not allowed"}},
		{"dubbo-go's key", `tracing: {sample-ratio: 0.5}`,
			[]string{"unknown key tracing.sample-ratio", "sampling"}},
		{"B3", `tracing: {propagation: {type: B3}}`,
			[]string{"tracing.propagation.type", "W3C", "weft.WithTextMapPropagator"}},
		{"compression", `tracing: {exporter: {compression: zstd}}`,
			[]string{"tracing.exporter.compression", "gzip or none"}},
		{"timeout", `tracing: {exporter: {timeout: -1}}`,
			[]string{"tracing.exporter.timeout: -1 is not allowed"}},
		{"enable and enabled disagree", `tracing: {enable: true, enabled: false}`,
			[]string{"tracing.enabled: false disagrees with tracing.enable: true"}},
		// The OTLP exporters are a module of their own: without it linked,
		// the error says which and how to add it.
		{"otlp-grpc not linked (the default type)", `tracing: {enable: true}`,
			[]string{"tracing.exporter.type: otlp-grpc", "github.com/weftrpc/weft/tracing-otlp", "weft.WithPlugins(otlp.Plugin())", "known: none"}},
		{"otlp-http not linked", `tracing: {enabled: true, exporter: {type: otlp-http}}`,
			[]string{"tracing.exporter.type: otlp-http", "github.com/weftrpc/weft/tracing-otlp"}},
		{"unknown exporter", `tracing: {enable: true, exporter: {type: jaeger}}`,
			[]string{"tracing.exporter.type", `unknown span exporter extension "jaeger" (known: none)`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := newFromYAML(validBase, c.yaml)
			if err == nil {
				t.Fatalf("New accepted %s", c.yaml)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\n  does not contain %q", err, w)
				}
			}
		})
	}
}

// The built-in exporter none needs no module; an App with it runs.
func TestTracingNoneExporter(t *testing.T) {
	app, err := newFromYAML(validBase, `tracing: {enable: true, sampling: {probability: 0.25}, exporter: {type: none}}`)
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := app.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A filter list that names the tracing filters while tracing is off is
// valid (a dubbo-go list carries them) and they pass calls through.
func TestTracingFiltersListedWhileOff(t *testing.T) {
	app, err := newFromYAML(validBase, `
provider: {filter: "otelServerTrace,default"}
consumer: {filter: "otelClientTrace,otelClientTracePeer"}
`)
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer app.Stop(context.Background())
	ref, err := app.Reference("greeter")
	if err != nil {
		t.Fatal(err)
	}
	inv := kernel.NewInvocation("sayHello", "off")
	if _, err := ref.Invoke(context.Background(), inv); err != nil {
		t.Fatal(err)
	}
	if _, ok := inv.Attachment("traceparent"); ok {
		t.Error("a traceparent was sent with tracing off")
	}
}
