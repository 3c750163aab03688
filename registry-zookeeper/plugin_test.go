package zookeeper_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/weftrpc/weft"
	zookeeper "github.com/weftrpc/weft/registry-zookeeper"
)

type greeter struct{}

func (greeter) Greet(_ context.Context, name string) (string, error) { return "hello " + name, nil }

// With the plugin, the App knows the registry and the config center by the
// name zookeeper, and lists it among the known names when a config asks
// for another.
func TestPluginNames(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown registry with the plugin", `
registries: {main: {address: "etcd://127.0.0.1:2379"}}`,
			[]string{"registries.main.address", `unknown registry extension "etcd" (known: embedded, zookeeper)`}},
		{"unknown config center with the plugin", `
config_center: {address: "apollo://127.0.0.1:8080", data_id: app.yaml}`,
			[]string{"config_center.address", `unknown config center extension "apollo" (known: zookeeper)`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := weft.New(weft.WithConfig(weft.ConfigYAML(tc.yaml)), weft.WithoutEnv(), weft.WithLogger(quiet),
				weft.WithService("greeter", greeter{}), weft.WithPlugins(zookeeper.Plugin()))
			if err == nil {
				t.Fatal("New succeeded, want a start-up error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
	// A ZooKeeper registry is valid config: New builds the App (it
	// connects at Start).
	app, err := weft.New(weft.WithoutEnv(), weft.WithLogger(quiet), weft.WithPlugins(zookeeper.Plugin()),
		weft.WithService("greeter", greeter{}), weft.WithConfig(weft.ConfigYAML(`
registries: {main: {address: "zookeeper://127.0.0.1:1"}}
provider:
  services:
    greeter: {interface: org.example.Greeter, protocol: injvm}`)))
	if err != nil {
		t.Fatalf("New with the plugin: %v", err)
	}
	if err := app.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}
