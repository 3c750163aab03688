package weft

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/env"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"

	netty "github.com/weftrpc/weft/transport-netty"
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
	// TLS, when set, secures every dubbo server and client of the App
	// (dubbo-go's tls_config).
	TLS TLSConfig `koanf:"tls"`
	// Logger is the App's logger when weft.WithLogger gives none.
	Logger LoggerConfig `koanf:"logger"`
	// Tracing is OpenTelemetry tracing, off by default (config_tracing.go).
	Tracing TracingConfig `koanf:"tracing"`
	// QoS is Dubbo's operations port: commands, probes, /metrics (config_qos.go).
	QoS QoSConfig `koanf:"qos"`
	// Metrics: Dubbo's metrics (config_metrics.go).
	Metrics MetricsConfig `koanf:"metrics"`
}

// TLSConfig is the App's TLS material, dubbo-go's key names. Files are read
// again when they change (a renewed certificate takes effect without a
// restart); the inline forms hold PEM text. A server presents tls-cert-file;
// with ca-cert-file it requires and verifies client certificates (mutual
// TLS). A client verifies servers against ca-cert-file (the system's roots
// without it), for tls-server-name or the host it dials, and presents
// tls-cert-file when set.
type TLSConfig struct {
	CACertFile    string `koanf:"ca-cert-file"`
	TLSCertFile   string `koanf:"tls-cert-file"`
	TLSKeyFile    string `koanf:"tls-key-file"`
	TLSServerName string `koanf:"tls-server-name"`
	CACert        string `koanf:"ca-cert"`
	TLSCert       string `koanf:"tls-cert"`
	TLSKey        string `koanf:"tls-key"`
}

func (c TLSConfig) transport() netty.TLSConfig {
	return netty.TLSConfig{CACertFile: c.CACertFile, CertFile: c.TLSCertFile, KeyFile: c.TLSKeyFile,
		CACert: c.CACert, Cert: c.TLSCert, Key: c.TLSKey, ServerName: c.TLSServerName}
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
	// extension: nacos://127.0.0.1:8848?namespace=dev (Nacos is a plugin:
	// weft.WithPlugins(nacos.Plugin()) of registry-nacos).
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
	// Path is the module file. A relative path set by a config file is
	// relative to that file's directory (LoadConfig makes it absolute), one
	// set by a YAML string or a WEFT_* variable to the working directory.
	// It is watched: a new file replaces the module without a restart.
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
	// MaxInstances caps the module's instances (idle, busy and starting,
	// the pool's spare included); a call that finds all busy waits for one
	// until its deadline (Timeout without one), then fails as limit
	// exceeded. 0 or unset: no cap, instances made as concurrent calls need
	// them.
	MaxInstances int `koanf:"max_instances"`
	// Config is the filter's own configuration, given to the guest as JSON
	// by get_config.
	Config map[string]any `koanf:"config"`
}

// ApplicationConfig names the application; its name goes on every URL.
type ApplicationConfig struct {
	Name    string `koanf:"name"`
	Version string `koanf:"version"`
	// RegisterMode is how the App's services are registered (Dubbo's
	// register-mode): interface (each service's URL, as Dubbo 2 does),
	// instance (the application's instances, Dubbo 3's application-level
	// discovery, with a MetadataService) or all (both; the default). The
	// instance level needs application.name and a registry that has it.
	RegisterMode string `koanf:"register_mode"`
	// MigrationStep is where references look for providers (Dubbo's
	// migration step): FORCE_INTERFACE, FORCE_APPLICATION, or
	// APPLICATION_FIRST (the default: application-level providers when
	// there are any, else interface-level ones).
	MigrationStep string `koanf:"migration_step"`
}

// ProtocolConfig configures one protocol, keyed by an id services refer to.
type ProtocolConfig struct {
	// Name is the protocol extension (dubbo, injvm); the id when empty.
	Name string `koanf:"name"`
	Host string `koanf:"host"`
	Port int    `koanf:"port"`
	// Threads bounds the provider's pool (Dubbo's default 200 for the
	// fixed and limited pools, no bound for cached and eager).
	Threads int `koanf:"threads"`
	// ThreadPool is Dubbo's `threadpool`: fixed (default), cached,
	// limited, eager, or a plugin's; CoreThreads, Queues and Alive (ms)
	// tune it as Dubbo's corethreads, queues and alive do.
	ThreadPool  string `koanf:"threadpool"`
	CoreThreads int    `koanf:"corethreads"`
	Queues      int    `koanf:"queues"`
	Alive       int    `koanf:"alive"`
	// Payload is the largest frame in bytes (Dubbo's default 8 MiB).
	Payload int `koanf:"payload"`
	// Serialization names what the protocol's services answer and its
	// references call in by default: hessian2, or a plugin's.
	Serialization string         `koanf:"serialization"`
	Params        map[string]any `koanf:"params"`
}

// RegistryConfig configures one registry, e.g. address embedded:///dir, or
// nacos://127.0.0.1:8848 with registry-nacos's plugin added.
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
	Shutdown  ShutdownConfig `koanf:"shutdown"`
	Filter    string         `koanf:"filter"`
	Timeout   int            `koanf:"timeout"`
	Executes  int            `koanf:"executes"`
	AccessLog string         `koanf:"accesslog"`
	// Token is Dubbo's token, the default of every service: true for a
	// random one per export, or the token itself (see plugins/filter/token).
	Token string `koanf:"token"`
	// TPS and TPSInterval are Dubbo's `tps` and `tps.interval` (ms, default
	// 60000), the default of every service: at most TPS calls per interval.
	TPS         int                      `koanf:"tps"`
	TPSInterval int                      `koanf:"tps_interval"`
	Protocol    string                   `koanf:"protocol"`
	Services    map[string]ServiceConfig `koanf:"services"`
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
	Filter    string `koanf:"filter"`
	Timeout   int    `koanf:"timeout"`
	Executes  int    `koanf:"executes"`
	AccessLog string `koanf:"accesslog"`
	// Token overrides provider.token: true for a random one, false for
	// none, or the token itself.
	Token string `koanf:"token"`
	// TPS and TPSInterval override provider.tps and provider.tps_interval.
	TPS         int `koanf:"tps"`
	TPSInterval int `koanf:"tps_interval"`
	Weight      int `koanf:"weight"`
	// Serialization overrides the protocol's serialization for this
	// service (Dubbo's service-level `serialization`).
	Serialization string                  `koanf:"serialization"`
	Methods       map[string]MethodConfig `koanf:"methods"`
	Params        map[string]any          `koanf:"params"`
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
	// ProvidedBy names, comma-separated, the applications that provide
	// the interface, instead of the registry's mapping (Dubbo's
	// provided-by).
	ProvidedBy string `koanf:"provided_by"`
	// MigrationStep overrides application.migration_step for this
	// reference.
	MigrationStep string `koanf:"migration_step"`
	// Serialization is what this reference writes its calls in (Dubbo's
	// `serialization`; hessian2 by default, or a plugin's by name).
	Serialization string `koanf:"serialization"`
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
// there, and so is a value out of its range (see checkValues). The config
// center's documents are merged through it too, so a published document
// with a bad value is rejected whole.
func LoadConfig(sources ...ConfigSource) (*Config, error) {
	k := koanf.New(".")
	// wasmFrom is, by filter name, the config file that last set its path
	// ("" for a YAML string or the environment): each source is loaded on
	// its own, then merged, so that which keys it set is known.
	wasmFrom := map[string]string{}
	for _, s := range sources {
		one := koanf.New(".")
		if err := s.load(one); err != nil {
			return nil, err
		}
		file, _ := s.(fileSource)
		for _, key := range one.Keys() {
			if name, ok := wasmPathKey(key); ok {
				wasmFrom[name] = string(file)
			}
		}
		if err := k.Merge(one); err != nil {
			return nil, fmt.Errorf("weft: config: %w", err)
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
	if errs := checkValues(&cfg, k.Exists); len(errs) > 0 {
		return nil, fmt.Errorf("weft: config: %w", errors.Join(errs...))
	}
	if err := resolveWasmPaths(&cfg, wasmFrom); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// wasmPathKey reports whether a flattened key is wasm.filters.<name>.path,
// and the name. (A path key inside a filter's free-form config has more
// levels, and is not one.)
func wasmPathKey(key string) (string, bool) {
	name, ok := strings.CutPrefix(key, "wasm.filters.")
	if !ok {
		return "", false
	}
	name, ok = strings.CutSuffix(name, ".path")
	return name, ok && name != "" && !strings.Contains(name, ".")
}

// resolveWasmPaths makes a relative wasm.filters.<name>.path set by a config
// file relative to that file's directory, as an absolute path: a config file
// and the modules it names are deployed together, wherever the App is started
// from, and an absolute path stays right if the working directory changes
// while the App runs (the file is polled for reloads). A path from a YAML
// string or the environment has no file to be relative to and stays relative
// to the working directory.
func resolveWasmPaths(cfg *Config, from map[string]string) error {
	for name, wc := range cfg.Wasm.Filters {
		file := from[name]
		if file == "" || wc.Path == "" || filepath.IsAbs(wc.Path) {
			continue
		}
		dir, err := filepath.Abs(filepath.Dir(file))
		if err != nil {
			return fmt.Errorf("weft: config: wasm.filters.%s.path: cannot resolve %q against the directory of %s: %w", name, wc.Path, file, err)
		}
		wc.Path = filepath.Join(dir, wc.Path)
		cfg.Wasm.Filters[name] = wc
	}
	return nil
}

// valueRule is the range of one numeric setting, and what to say when a
// value is outside it.
type valueRule struct {
	min, max int64 // inclusive
	// byPresence: a 0 that was never set (decoding gives 0 for an absent
	// key) is the default; only an explicit value is held to min.
	byPresence bool
	want, fix  string
}

// The ranges. "Inherited" means a service or reference setting falls back
// to provider.* or consumer.*, a method setting to its service or reference.
var (
	ruleTimeout = valueRule{min: 0, max: math.MaxInt64,
		want: "ms > 0 (0 or unset: inherited, 1000 ms by default)", fix: "set a positive number of ms or remove the key"}
	ruleTimeoutDefault = valueRule{min: 0, max: math.MaxInt64,
		want: "ms > 0 (0 or unset: the default 1000 ms)", fix: "set a positive number of ms or remove the key"}
	ruleRetries = valueRule{min: 0, max: math.MaxInt64,
		want: ">= 0 (0: no retry; unset: inherited, 2 by default)", fix: "set retries: 0 to never retry, or remove the key"}
	ruleRetriesDefault = valueRule{min: 0, max: math.MaxInt64,
		want: ">= 0 (0: no retry; unset: the default 2)", fix: "set retries: 0 to never retry, or remove the key"}
	ruleExecutes = valueRule{min: 0, max: math.MaxInt64,
		want: ">= 0 (0 or unset: inherited, no limit by default)", fix: "set the most calls of a method the provider runs at once, or 0"}
	ruleExecutesDefault = valueRule{min: 0, max: math.MaxInt64,
		want: ">= 0 (0 or unset: no limit)", fix: "set the most calls of a method the provider runs at once, or 0"}
	ruleActives = valueRule{min: 0, max: math.MaxInt64,
		want: ">= 0 (0 or unset: inherited, no limit by default)", fix: "set the most calls of a method in flight to one provider, or 0"}
	ruleActivesDefault = valueRule{min: 0, max: math.MaxInt64,
		want: ">= 0 (0 or unset: no limit)", fix: "set the most calls of a method in flight to one provider, or 0"}
	ruleTPS = valueRule{min: 0, max: math.MaxInt64,
		want: ">= 0 calls per interval (0 or unset: no limit)", fix: "set how many calls the service takes per tps_interval, or 0"}
	ruleTPSInterval = valueRule{min: 0, max: math.MaxInt64,
		want: ">= 0 ms (0 or unset: inherited, 60000 by default)", fix: "set the length of a tps window in ms, or remove the key"}
	ruleWeight = valueRule{min: 0, max: math.MaxInt64,
		want: ">= 0 (0 or unset: the default 100)", fix: "set a relative weight such as 100, or remove the key"}
	ruleForks = valueRule{min: 0, max: math.MaxInt64,
		want: ">= 0 (0 or unset: the default 2)", fix: "set how many providers a forking call tries at once, or remove the key"}
	ruleConnections = valueRule{min: 0, max: math.MaxInt64,
		want: ">= 0 (0 or unset: one connection shared by the references to the same address)",
		fix:  "set how many connections of its own the reference opens, or 0"}
	ruleShutdownWait = valueRule{min: 0, max: math.MaxInt64,
		want: ">= 0 ms (0 or unset: no wait)", fix: "set the ms consumers get to hear of the stop, or 0"}
	rulePort = valueRule{min: 0, max: 65535,
		want: "0..65535 (0 picks a free port)", fix: "set a TCP port such as 20880, or 0"}
	ruleThreads = valueRule{min: 1, max: math.MaxInt64, byPresence: true,
		want: "> 0 (unset: the default 200)", fix: "set the size of the provider's pool, e.g. threads: 200, or remove the key"}
	// The frame's length is a signed 32-bit field on the wire.
	rulePayload = valueRule{min: 1, max: math.MaxInt32, byPresence: true,
		want: "bytes in 1..2147483647, the frame length being a 32-bit field (unset: the default 8388608, 8 MiB)",
		fix:  "set the largest frame in bytes, e.g. payload: 8388608, or remove the key"}
	ruleWasmPages = valueRule{min: 0, max: 65536,
		want: "0..65536 pages of 64 KiB, 65536 being wasm32's 4 GiB (0 or unset: the default 512, 32 MiB)",
		fix:  "set the memory cap of an instance in pages, e.g. max_memory_pages: 512"}
	ruleWasmTimeout = valueRule{min: 0, max: math.MaxInt64,
		want: ">= 0 ms (0 or unset: the default 1000 ms)", fix: "set the ms each guest callback may take, or remove the key"}
	ruleWasmInstances = valueRule{min: 0, max: math.MaxInt32,
		want: ">= 0 instances (0 or unset: no cap, instances made as concurrent calls need them)",
		fix:  "set the most instances of the module at once, e.g. max_instances: 8, or 0 for no cap"}
)

// checkValues reports every numeric setting of cfg that has no meaning
// (a negative timeout, a port out of range, ...) by its key path, in key
// order. set says whether a key was given at all, for the settings whose
// explicit 0 is an error while an unset one takes the default.
//
// Settings given in a `params` map (protocols.<id>.params: heartbeat,
// reconnect; services' and references' params: warmup, hash.nodes, ...)
// reach the URL as strings and are not checked here; the plugin that reads
// one parses it.
func checkValues(cfg *Config, set func(key string) bool) []error {
	var errs []error
	check := func(path string, v int, r valueRule) {
		if v == 0 && r.byPresence && !set(path) {
			return // unset: the default
		}
		if int64(v) >= r.min && int64(v) <= r.max {
			return
		}
		errs = append(errs, fmt.Errorf("%s: %d is not allowed: want %s; %s", path, v, r.want, r.fix))
	}
	checkPtr := func(path string, v *int, r valueRule) {
		if v != nil {
			check(path, *v, r)
		}
	}
	methods := func(at string, ms map[string]MethodConfig) {
		for name, mc := range ms {
			path := at + ".methods." + name
			check(path+".timeout", mc.Timeout, ruleTimeout)
			checkPtr(path+".retries", mc.Retries, ruleRetries)
			check(path+".executes", mc.Executes, ruleExecutes)
			check(path+".actives", mc.Actives, ruleActives)
			check(path+".forks", mc.Forks, ruleForks)
		}
	}

	for id, p := range cfg.Protocols {
		path := "protocols." + id
		check(path+".port", p.Port, rulePort)
		check(path+".threads", p.Threads, ruleThreads)
		check(path+".payload", p.Payload, rulePayload)
	}

	pc := cfg.Provider
	check("provider.timeout", pc.Timeout, ruleTimeoutDefault)
	check("provider.executes", pc.Executes, ruleExecutesDefault)
	check("provider.tps", pc.TPS, ruleTPS)
	check("provider.tps_interval", pc.TPSInterval, ruleTPSInterval)
	check("provider.shutdown.wait", pc.Shutdown.Wait, ruleShutdownWait)
	for id, sc := range pc.Services {
		path := "provider.services." + id
		check(path+".timeout", sc.Timeout, ruleTimeout)
		check(path+".executes", sc.Executes, ruleExecutes)
		check(path+".tps", sc.TPS, ruleTPS)
		check(path+".tps_interval", sc.TPSInterval, ruleTPSInterval)
		check(path+".weight", sc.Weight, ruleWeight)
		methods(path, sc.Methods)
	}

	cc := cfg.Consumer
	check("consumer.timeout", cc.Timeout, ruleTimeoutDefault)
	checkPtr("consumer.retries", cc.Retries, ruleRetriesDefault)
	check("consumer.actives", cc.Actives, ruleActivesDefault)
	for id, rc := range cc.References {
		path := "consumer.references." + id
		check(path+".timeout", rc.Timeout, ruleTimeout)
		checkPtr(path+".retries", rc.Retries, ruleRetries)
		check(path+".actives", rc.Actives, ruleActives)
		check(path+".connections", rc.Connections, ruleConnections)
		methods(path, rc.Methods)
	}

	for name, wc := range cfg.Wasm.Filters {
		path := "wasm.filters." + name
		check(path+".max_memory_pages", wc.MaxMemoryPages, ruleWasmPages)
		check(path+".timeout", wc.Timeout, ruleWasmTimeout)
		check(path+".max_instances", wc.MaxInstances, ruleWasmInstances)
	}
	errs = append(errs, cfg.QoS.check()...)
	if t := cfg.TLS; len(pc.Services) > 0 && !t.transport().IsZero() && t.TLSCertFile == "" && t.TLSCert == "" {
		// The block turns TLS on for the App's servers too, and a TLS server
		// without a certificate fails every handshake: say so at start.
		errs = append(errs, fmt.Errorf("tls: this App provides services, and with a tls block its servers speak TLS, which needs a certificate: "+
			"set tls-cert-file and tls-key-file (or tls-cert and tls-key); a block with only tls-server-name or ca-cert-file serves a consumer-only App"))
	}
	// Router priorities and WASM filter orders are any int: they only sort.
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return errs
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
