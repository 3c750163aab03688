package weft

import (
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/env"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"
)

// Config is what an App is composed from. Its keys are Dubbo's: a Dubbo
// user's `timeout`, `retries`, `loadbalance`, `executes`, ... mean the same
// here. Provider and consumer settings are defaults for every service and
// reference; a service, reference or method setting overrides them.
type Config struct {
	Application ApplicationConfig         `koanf:"application"`
	Protocols   map[string]ProtocolConfig `koanf:"protocols"`
	Registries  map[string]RegistryConfig `koanf:"registries"`
	Provider    ProviderConfig            `koanf:"provider"`
	Consumer    ConsumerConfig            `koanf:"consumer"`
	Wasm        WasmConfig                `koanf:"wasm"`
	// ConfigCenter names a document in a config center that is merged
	// over the files (and under WEFT_* variables) at start and watched
	// while the App runs.
	ConfigCenter ConfigCenterConfig `koanf:"config_center"`
}

// ConfigCenterConfig is Dubbo's config-center: a YAML document (a Nacos data
// id) with the same keys as the files. Changes to its dynamic parts apply
// without a restart: routers and filter lists of references, filter lists
// of services, the config of WASM filters, and every other setting of an
// existing reference (timeouts, retries, load balancing...), which is
// referred again. Other changes are logged as needing a restart and left
// alone; a document that does not decode is rejected whole.
type ConfigCenterConfig struct {
	// Address is the config center's URL; its protocol names the
	// extension: nacos://127.0.0.1:8848?namespace=dev.
	Address string `koanf:"address"`
	// DataID is the document's key; default application.name.
	DataID string `koanf:"data_id"`
	// Group is the document's group; default "dubbo", as in Dubbo.
	Group string `koanf:"group"`
	// Check (default true) makes an unreachable config center a start-up
	// error; false starts from the files alone and applies the document
	// when it can be read.
	Check *bool `koanf:"check"`
}

// WasmConfig declares filters written in WebAssembly (sdk/ABI.md).
type WasmConfig struct {
	// Filters are keyed by the filter's extension name, the name filter
	// lists use (`filter: "wasm-authz,default"`).
	Filters map[string]WasmFilterConfig `koanf:"filters"`
}

// WasmFilterConfig declares one WASM filter. It activates like a native
// filter: with Groups (and Keys) it joins the activated set of those groups
// at Order; without Groups it runs only where a filter list names it.
type WasmFilterConfig struct {
	// Path is the module file, relative to the working directory. It is
	// watched: a new file replaces the module without a restart.
	Path   string   `koanf:"path"`
	Groups []string `koanf:"groups"`
	Keys   []string `koanf:"keys"`
	Order  int      `koanf:"order"`
	// MaxMemoryPages caps each instance's memory in 64 KiB pages (default
	// 512, 32 MiB).
	MaxMemoryPages int `koanf:"max_memory_pages"`
	// Timeout (ms) bounds each guest callback of a call that has no deadline
	// of its own (default 1000); a call's deadline applies when it has one.
	Timeout int `koanf:"timeout"`
	// Config is the filter's own configuration, given to the guest as JSON
	// by get_config.
	Config map[string]any `koanf:"config"`
}

// ApplicationConfig names the application; its name goes on every URL.
type ApplicationConfig struct {
	Name    string `koanf:"name"`
	Version string `koanf:"version"`
}

// ProtocolConfig configures one protocol, keyed by an id services refer to.
type ProtocolConfig struct {
	// Name is the protocol extension (dubbo, injvm); the id when empty.
	Name string `koanf:"name"`
	Host string `koanf:"host"`
	Port int    `koanf:"port"`
	// Threads bounds the provider's pool (Dubbo's default 200).
	Threads int `koanf:"threads"`
	// Payload is the largest frame in bytes (Dubbo's default 8 MiB).
	Payload       int            `koanf:"payload"`
	Serialization string         `koanf:"serialization"`
	Params        map[string]any `koanf:"params"`
}

// RegistryConfig configures one registry, e.g. address nacos://127.0.0.1:8848.
type RegistryConfig struct {
	Address string `koanf:"address"`
}

// MethodConfig overrides settings for one method (`methods.<name>.*`).
type MethodConfig struct {
	Timeout     int    `koanf:"timeout"`
	Retries     *int   `koanf:"retries"`
	LoadBalance string `koanf:"loadbalance"`
	Executes    int    `koanf:"executes"`
	Actives     int    `koanf:"actives"`
	Mock        string `koanf:"mock"`
	Sticky      bool   `koanf:"sticky"`
	Forks       int    `koanf:"forks"`
	// Return false makes the method's calls one-way.
	Return *bool `koanf:"return"`
}

// RouterConfig is one routing rule of a reference: a condition rule,
// "when => then" (see cluster.ConditionRule), or, with type tag, Dubbo's
// tag rule: tags with the provider addresses that carry them.
type RouterConfig struct {
	// Type is the router extension; condition when empty.
	Type string `koanf:"type"`
	Rule string `koanf:"rule"`
	// Tags (type tag) assign tags to provider addresses, overriding the
	// providers' own dubbo.tag.
	Tags     []TagConfig `koanf:"tags"`
	Force    bool        `koanf:"force"`
	Priority int         `koanf:"priority"`
	// Runtime is accepted for Dubbo's sake; weft evaluates every rule on
	// every call.
	Runtime bool  `koanf:"runtime"`
	Enabled *bool `koanf:"enabled"`
}

// TagConfig is one tag of a tag rule.
type TagConfig struct {
	Name      string   `koanf:"name"`
	Addresses []string `koanf:"addresses"`
}

// ProviderConfig holds the defaults of every service and the services.
type ProviderConfig struct {
	// Shutdown tunes the graceful stop of providers.
	Shutdown  ShutdownConfig           `koanf:"shutdown"`
	Filter    string                   `koanf:"filter"`
	Timeout   int                      `koanf:"timeout"`
	Executes  int                      `koanf:"executes"`
	AccessLog string                   `koanf:"accesslog"`
	Protocol  string                   `koanf:"protocol"`
	Services  map[string]ServiceConfig `koanf:"services"`
}

// ShutdownConfig: on stop a provider unregisters, waits Wait ms for
// consumers to hear of it, then refuses new calls and drains those in flight.
type ShutdownConfig struct {
	Wait int `koanf:"wait"`
}

// ServiceConfig exports one implementation.
type ServiceConfig struct {
	Interface string `koanf:"interface"`
	// Ref names the registered implementation; the service id when empty.
	Ref     string `koanf:"ref"`
	Version string `koanf:"version"`
	Group   string `koanf:"group"`
	// Protocol is a comma-separated list of protocol ids (or names).
	Protocol string `koanf:"protocol"`
	// Filter is appended to provider.filter, as in Dubbo.
	Filter    string                  `koanf:"filter"`
	Timeout   int                     `koanf:"timeout"`
	Executes  int                     `koanf:"executes"`
	AccessLog string                  `koanf:"accesslog"`
	Weight    int                     `koanf:"weight"`
	Methods   map[string]MethodConfig `koanf:"methods"`
	Params    map[string]any          `koanf:"params"`
}

// ConsumerConfig holds the defaults of every reference and the references.
type ConsumerConfig struct {
	Filter      string                     `koanf:"filter"`
	Timeout     int                        `koanf:"timeout"`
	Retries     *int                       `koanf:"retries"`
	Cluster     string                     `koanf:"cluster"`
	LoadBalance string                     `koanf:"loadbalance"`
	Actives     int                        `koanf:"actives"`
	References  map[string]ReferenceConfig `koanf:"references"`
}

// ReferenceConfig refers to one remote or in-process service.
type ReferenceConfig struct {
	Interface string `koanf:"interface"`
	Version   string `koanf:"version"`
	Group     string `koanf:"group"`
	// Protocol picks the protocol of a reference without url; "injvm" calls a
	// service of the same App.
	Protocol string `koanf:"protocol"`
	// URL lists providers to call directly, separated by ';' as in Dubbo.
	URL         string `koanf:"url"`
	Cluster     string `koanf:"cluster"`
	LoadBalance string `koanf:"loadbalance"`
	Retries     *int   `koanf:"retries"`
	Timeout     int    `koanf:"timeout"`
	Actives     int    `koanf:"actives"`
	Filter      string `koanf:"filter"`
	Mock        string `koanf:"mock"`
	Sticky      bool   `koanf:"sticky"`
	Connections int    `koanf:"connections"`
	// Routers are condition rules applied to this reference's providers;
	// the tag router (dubbo.tag) is always on.
	Routers []RouterConfig          `koanf:"routers"`
	Methods map[string]MethodConfig `koanf:"methods"`
	Params  map[string]any          `koanf:"params"`
}

// EnvPrefix starts the environment variables that override config files:
// WEFT_CONSUMER_TIMEOUT=500 sets consumer.timeout. Each '_' is a level, and
// names are lower-cased, so keys with capitals (method names) are reached
// through files only.
const EnvPrefix = "WEFT_"

// ConfigSource is one layer of configuration; layers merge in order.
type ConfigSource interface {
	load(k *koanf.Koanf) error
}

type fileSource string

func (f fileSource) load(k *koanf.Koanf) error {
	if _, err := os.Stat(string(f)); err != nil {
		return fmt.Errorf("weft: config file: %w", err)
	}
	if err := k.Load(file.Provider(string(f)), yaml.Parser()); err != nil {
		return fmt.Errorf("weft: config file %s: %w", f, err)
	}
	return nil
}

type yamlSource []byte

func (y yamlSource) load(k *koanf.Koanf) error {
	if err := k.Load(bytesProvider(y), yaml.Parser()); err != nil {
		return fmt.Errorf("weft: config yaml: %w", err)
	}
	return nil
}

type bytesProvider []byte

func (b bytesProvider) ReadBytes() ([]byte, error) { return b, nil }
func (b bytesProvider) Read() (map[string]any, error) {
	return nil, fmt.Errorf("weft: bytes provider needs a parser")
}

type envSource string

func (p envSource) load(k *koanf.Koanf) error {
	prefix := string(p)
	return k.Load(env.Provider(prefix, ".", func(s string) string {
		return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(s, prefix)), "_", ".")
	}), nil)
}

// LoadConfig merges the sources in order and decodes them strictly: a key
// that weft does not know is an error naming its path and the keys known
// there.
func LoadConfig(sources ...ConfigSource) (*Config, error) {
	k := koanf.New(".")
	for _, s := range sources {
		if err := s.load(k); err != nil {
			return nil, err
		}
	}
	keys := k.Keys()
	var errs []string
	for _, key := range keys {
		if err := checkKey(reflect.TypeOf(Config{}), strings.Split(key, "."), ""); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("weft: config: %s", strings.Join(errs, "; "))
	}
	var cfg Config
	if err := k.UnmarshalWithConf("", &cfg, koanf.UnmarshalConf{Tag: "koanf"}); err != nil {
		return nil, fmt.Errorf("weft: config: %w", err)
	}
	return &cfg, nil
}

// checkKey walks one flattened key through the Config type.
func checkKey(t reflect.Type, parts []string, at string) error {
	for len(parts) > 0 {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		part := parts[0]
		path := part
		if at != "" {
			path = at + "." + part
		}
		switch t.Kind() {
		case reflect.Struct:
			var known []string
			var next reflect.Type
			for i := 0; i < t.NumField(); i++ {
				tag := t.Field(i).Tag.Get("koanf")
				known = append(known, tag)
				if tag == part {
					next = t.Field(i).Type
				}
			}
			if next == nil {
				sort.Strings(known)
				where := at
				if where == "" {
					where = "the top level"
				}
				return fmt.Errorf("unknown key %s (known at %s: %s)", path, where, strings.Join(known, ", "))
			}
			t = next
		case reflect.Map:
			t = t.Elem()
		case reflect.Interface:
			// Free-form parameters: anything below is the user's.
			return nil
		default:
			return fmt.Errorf("key %s: %s is a value, it has no key %q", path, at, part)
		}
		at, parts = path, parts[1:]
	}
	return nil
}

// ConfigFiles returns sources for YAML files, merged in the given order.
func ConfigFiles(paths ...string) []ConfigSource {
	out := make([]ConfigSource, len(paths))
	for i, p := range paths {
		out[i] = fileSource(p)
	}
	return out
}

// ConfigYAML returns a source for a YAML document held in memory.
func ConfigYAML(doc string) ConfigSource { return yamlSource(doc) }

// ConfigEnv returns the source of WEFT_* environment variables.
func ConfigEnv() ConfigSource { return envSource(EnvPrefix) }
