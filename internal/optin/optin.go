// Package optin names the integrations weft provides outside the root
// module's core (Nacos, ZooKeeper), so that a config naming one the program
// did not add is told how to add it.
package optin

import (
	"fmt"
	"strings"
)

// optIn is an integration weft provides outside the root package, which a
// program links only if it adds the plugin: heavy dependencies (an SDK and
// what its init touches) are paid by the programs that use them alone.
type optIn struct {
	pkg, alias, plugin string
}

// optIns names, by extension point and name, the integration that provides
// it, so that a config naming one the program did not add is told where it
// lives and the line that adds it, rather than only that the name is
// unknown. The points are the Loaders' (loaders in plugins.go).
var optIns = map[string]map[string]optIn{
	"registry": {
		"nacos":     {"github.com/weftrpc/weft/registry-nacos", "nacos", "nacos.Plugin()"},
		"zookeeper": {"github.com/weftrpc/weft/registry-zookeeper", "zookeeper", "zookeeper.Plugin()"},
	},
	"config center": {
		"nacos":     {"github.com/weftrpc/weft/registry-nacos", "nacos", "nacos.Plugin()"},
		"zookeeper": {"github.com/weftrpc/weft/registry-zookeeper", "zookeeper", "zookeeper.Plugin()"},
	},
}

// NotAdded explains, for the extension name of point that config asks for
// and the program lacks, the opt-in integration that provides it; nil if
// the name is not one. known are the names the program has.
func NotAdded(point, name string, known []string) error {
	m, ok := optIns[point][name]
	if !ok {
		return nil
	}
	others := "no other " + point + " is linked"
	if len(known) > 0 {
		others = "or use a " + point + " that is linked (known: " + strings.Join(known, ", ") + ")"
	}
	return fmt.Errorf("the %s %s lives in %s, which this program does not link: import %s %q and pass weft.WithPlugins(%s) to weft.New; %s",
		name, point, m.pkg, m.alias, m.pkg, m.plugin, others)
}
