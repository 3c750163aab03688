// Package config holds the types of weft's configuration (Dubbo's keys) and
// their checks. Each feature's own block lives beside the feature (qos.Settings,
// wasmfilter.Settings, metrics.Config, tracing.Config) and validates itself;
// Config.Validate runs them all. The files, the environment and the config
// center are read into a Config by the root package (weft.LoadConfig): this
// package knows no loader.
package config

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"

	wasmfilter "github.com/weftrpc/weft/filters-wasm"
	"github.com/weftrpc/weft/plugins/filter/metrics"
	"github.com/weftrpc/weft/plugins/filter/tracing"
	"github.com/weftrpc/weft/qos"
	netty "github.com/weftrpc/weft/transport-netty"
)

// Config is what an App is composed from. Its keys are Dubbo's: a Dubbo
// user's `timeout`, `retries`, `loadbalance`, `executes`, ... mean the same
// here. Provider and consumer settings are defaults for every service and
// reference; a service, reference or method setting overrides them.
type Config struct {
	Application Application         `koanf:"application"`
	Protocols   map[string]Protocol `koanf:"protocols"`
	Registries  map[string]Registry `koanf:"registries"`
	Provider    Provider            `koanf:"provider"`
	Consumer    Consumer            `koanf:"consumer"`
	Wasm        wasmfilter.Settings `koanf:"wasm"`
	// ConfigCenter names a document in a config center that is merged
	// over the files (and under WEFT_* variables) at start and watched
	// while the App runs.
	ConfigCenter Center `koanf:"config_center"`
	// TLS, when set, secures every dubbo server and client of the App
	// (dubbo-go's tls_config).
	TLS TLS `koanf:"tls"`
	// Logger is the App's logger when weft.WithLogger gives none.
	Logger Logger `koanf:"logger"`
	// Tracing is OpenTelemetry tracing, off by default (plugins/filter/tracing).
	Tracing tracing.Config `koanf:"tracing"`
	// QoS is Dubbo's operations port: commands, probes, /metrics (qos/).
	QoS qos.Settings `koanf:"qos"`
	// Metrics: Dubbo's metrics (plugins/filter/metrics).
	Metrics metrics.Config `koanf:"metrics"`
}

// TLS is the App's TLS material, dubbo-go's key names. Files are read
// again when they change (a renewed certificate takes effect without a
// restart); the inline forms hold PEM text. A server presents tls-cert-file;
// with ca-cert-file it requires and verifies client certificates (mutual
// TLS). A client verifies servers against ca-cert-file (the system's roots
// without it), for tls-server-name or the host it dials, and presents
// tls-cert-file when set.
type TLS struct {
	CACertFile    string `koanf:"ca-cert-file"`
	TLSCertFile   string `koanf:"tls-cert-file"`
	TLSKeyFile    string `koanf:"tls-key-file"`
	TLSServerName string `koanf:"tls-server-name"`
	CACert        string `koanf:"ca-cert"`
	TLSCert       string `koanf:"tls-cert"`
	TLSKey        string `koanf:"tls-key"`
}

// Transport is the TLS material in transport-netty's terms.
func (c TLS) Transport() netty.TLSConfig {
	return netty.TLSConfig{CACertFile: c.CACertFile, CertFile: c.TLSCertFile, KeyFile: c.TLSKeyFile,
		CACert: c.CACert, Cert: c.TLSCert, Key: c.TLSKey, ServerName: c.TLSServerName}
}

// Center is Dubbo's config-center: a YAML document (a Nacos data
// id) with the same keys as the files. Changes to its dynamic parts apply
// without a restart: routers and filter lists of references, filter lists
// of services, the config of WASM filters, and every other setting of an
// existing reference (timeouts, retries, load balancing...), which is
// referred again. Other changes are logged as needing a restart and left
// alone; a document that does not decode is rejected whole.
type Center struct {
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

// Application names the application; its name goes on every URL.
type Application struct {
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

// Protocol configures one protocol, keyed by an id services refer to.
type Protocol struct {
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
	Payload int `koanf:"payload" unit:"bytes"`
	// Transporter is Dubbo's `transporter`: netty (Dubbo 2's name) or
	// netty4 (Dubbo 3's), both weft's transport-netty, the only transport;
	// accepted so that a Dubbo config keeps working, and checked.
	Transporter string `koanf:"transporter"`
	// Serialization names what the protocol's services answer and its
	// references call in by default: hessian2, or a plugin's.
	Serialization string         `koanf:"serialization"`
	Params        map[string]any `koanf:"params"`
}

// Registry configures one registry, e.g. address embedded:///dir, or
// nacos://127.0.0.1:8848 with registry-nacos's plugin added.
type Registry struct {
	Address string `koanf:"address"`
	// Register false: the App's services are not registered here (Dubbo's
	// register); Subscribe false: its references find no providers here
	// (Dubbo's subscribe). Both default to true.
	Register  *bool `koanf:"register"`
	Subscribe *bool `koanf:"subscribe"`
	// Zone, Preferred and Weight are Dubbo's RegistryConfig keys that the
	// zone-aware cluster of a reference subscribed in several registries
	// reads: the registry's zone, "always use this registry first", and
	// its share of the calls when none is preferred (default 100).
	Zone      string `koanf:"zone"`
	Preferred bool   `koanf:"preferred"`
	Weight    int    `koanf:"weight"`
}

// Method overrides settings for one method (`methods.<name>.*`).
type Method struct {
	Timeout     int    `koanf:"timeout" unit:"ms"`
	Retries     *int   `koanf:"retries"`
	LoadBalance string `koanf:"loadbalance"`
	Executes    int    `koanf:"executes"`
	Actives     int    `koanf:"actives"`
	Mock        string `koanf:"mock"`
	Sticky      bool   `koanf:"sticky"`
	Forks       int    `koanf:"forks"`
	// Merger is Dubbo's merger: how a reference of several groups merges
	// their answers (cluster.KeyMerger).
	Merger string `koanf:"merger"`
	// Return false makes the method's calls one-way.
	Return *bool `koanf:"return"`
	// Params and Returns declare, with Java type names, a method of a
	// service whose implementation is not Go (impl): its parameters
	// ("java.lang.String", "long", "org.example.User") and its result,
	// as Java and dubbo-go callers send them over hessian2. With idl,
	// Params map the request's fields, in order, to the parameters of
	// the Java method a forward calls.
	Params  []string `koanf:"params"`
	Returns string   `koanf:"returns"`
}

// Impl implements a service without Go: by forwarding each call to a
// reference (a bridge between protocols, registries or clusters), or by a
// WASM module.
type Impl struct {
	// Forward names the reference (consumer.references.<id>) that each
	// call is passed to.
	Forward string `koanf:"forward"`
	// Allow is a gateway's allow-list (a service of interface "*"
	// forwarding to a reference of interface "*"): the services it
	// forwards, by name or glob ("org.example.*"), each optionally with
	// ":version". Calls of any other service are refused.
	Allow []string `koanf:"allow"`
	// Wasm is the module that implements the service (weft's ABI v1.2:
	// it exports weft_on_call), with the sandbox and pool settings of a
	// WASM filter (wasm.filters.<name>): SHA256 pins it, Config is its
	// get_config, Clusters name what its http_call may reach
	// ("ref:<reference id>" calls another service). A relative path set
	// by a config file is relative to that file's directory. The file is
	// watched: a new module replaces the old without a restart.
	Wasm           string            `koanf:"wasm"`
	SHA256         string            `koanf:"sha256"`
	Config         map[string]any    `koanf:"config"`
	MaxInstances   int               `koanf:"max_instances"`
	MaxMemoryPages int               `koanf:"max_memory_pages"`
	Timeout        int               `koanf:"timeout" unit:"ms"`
	Clusters       map[string]string `koanf:"clusters"`
	MaxCallouts    int               `koanf:"max_callouts"`
}

// Router is one routing rule of a reference: a condition rule,
// "when => then" (see cluster.ConditionRule), or, with type tag, Dubbo's
// tag rule: tags with the provider addresses that carry them.
type Router struct {
	// Type is the router extension; condition when empty.
	Type string `koanf:"type"`
	Rule string `koanf:"rule"`
	// Tags (type tag) assign tags to provider addresses, overriding the
	// providers' own dubbo.tag.
	Tags     []Tag `koanf:"tags"`
	Force    bool  `koanf:"force"`
	Priority int   `koanf:"priority"`
	// Runtime is accepted for Dubbo's sake; weft evaluates every rule on
	// every call.
	Runtime bool  `koanf:"runtime"`
	Enabled *bool `koanf:"enabled"`
}

// Tag is one tag of a tag rule.
type Tag struct {
	Name      string   `koanf:"name"`
	Addresses []string `koanf:"addresses"`
}

// Provider holds the defaults of every service and the services.
type Provider struct {
	// Shutdown tunes the graceful stop of providers.
	Shutdown  Shutdown `koanf:"shutdown"`
	Filter    string   `koanf:"filter"`
	Timeout   int      `koanf:"timeout" unit:"ms"`
	Executes  int      `koanf:"executes"`
	AccessLog string   `koanf:"accesslog"`
	// Token is Dubbo's token, the default of every service: true for a
	// random one per export, or the token itself (see plugins/filter/token).
	Token string `koanf:"token"`
	// TPS and TPSInterval are Dubbo's `tps` and `tps.interval` (ms, default
	// 60000), the default of every service: at most TPS calls per interval.
	TPS         int `koanf:"tps"`
	TPSInterval int `koanf:"tps_interval" unit:"ms"`
	// Register is every service's default `register` (Service.Register).
	Register *bool `koanf:"register"`
	// Delay is every service's default `delay` (ms, Service.Delay).
	Delay    int                `koanf:"delay" unit:"ms"`
	Protocol string             `koanf:"protocol"`
	Services map[string]Service `koanf:"services"`
}

// Shutdown: on stop a provider unregisters, waits Wait ms for
// consumers to hear of it, then refuses new calls and drains those in flight.
type Shutdown struct {
	Wait int `koanf:"wait" unit:"ms"`
}

// Service exports one implementation.
type Service struct {
	// Interface is the service's name (org.example.Greeter); with idl it
	// defaults to the IDL's service.
	Interface string `koanf:"interface"`
	// Ref names the registered implementation; the service id when empty.
	Ref string `koanf:"ref"`
	// Impl implements the service from config alone (a forward, a WASM
	// module) instead of a registered Go implementation.
	Impl *Impl `koanf:"impl"`
	// IDL declares the interface by a protobuf file (.proto, compiled at
	// start-up, or a descriptor set from protoc -o) and Service names its
	// service there (pkg.Greeter; may be left out when the file has one).
	// The interface defaults to that service's full name. Without idl,
	// an impl's interface is declared by methods.<name>.params/returns.
	IDL     string `koanf:"idl"`
	Service string `koanf:"service"`
	Version string `koanf:"version"`
	Group   string `koanf:"group"`
	// Protocol is a comma-separated list of protocol ids (or names).
	Protocol string `koanf:"protocol"`
	// Filter is appended to provider.filter, as in Dubbo.
	Filter    string `koanf:"filter"`
	Timeout   int    `koanf:"timeout" unit:"ms"`
	Executes  int    `koanf:"executes"`
	AccessLog string `koanf:"accesslog"`
	// Token overrides provider.token: true for a random one, false for
	// none, or the token itself.
	Token string `koanf:"token"`
	// TPS and TPSInterval override provider.tps and provider.tps_interval.
	TPS         int `koanf:"tps"`
	TPSInterval int `koanf:"tps_interval" unit:"ms"`
	Weight      int `koanf:"weight"`
	// Serialization overrides the protocol's serialization for this
	// service (Dubbo's service-level `serialization`).
	Serialization string `koanf:"serialization"`
	// Register false exports the service without registering it (Dubbo's
	// `register`; provider.register is the default): only direct calls
	// (url:) reach it.
	Register *bool `koanf:"register"`
	// Tag labels the service's providers for Dubbo's tag routing (its URL's
	// dubbo.tag): consumers whose calls carry the tag choose them.
	Tag string `koanf:"tag"`
	// Delay (ms) is Dubbo's delay: the service is exported at start, and
	// registered (found by consumers) that long after; provider.delay is
	// the default.
	Delay int `koanf:"delay" unit:"ms"`
	// Deprecated is Dubbo's deprecated: its providers' URLs say so, and a
	// consumer that refers one logs a warning naming the service.
	Deprecated bool              `koanf:"deprecated"`
	Methods    map[string]Method `koanf:"methods"`
	Params     map[string]any    `koanf:"params"`
}

// Consumer holds the defaults of every reference and the references.
type Consumer struct {
	Filter      string `koanf:"filter"`
	Timeout     int    `koanf:"timeout" unit:"ms"`
	Retries     *int   `koanf:"retries"`
	Cluster     string `koanf:"cluster"`
	LoadBalance string `koanf:"loadbalance"`
	Actives     int    `koanf:"actives"`
	// Check is Dubbo's consumer `check`, the default of every reference's
	// (Reference.Check).
	Check      *bool                `koanf:"check"`
	References map[string]Reference `koanf:"references"`
}

// Reference refers to one remote or in-process service.
type Reference struct {
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
	Timeout     int    `koanf:"timeout" unit:"ms"`
	Actives     int    `koanf:"actives"`
	Filter      string `koanf:"filter"`
	Mock        string `koanf:"mock"`
	Sticky      bool   `koanf:"sticky"`
	// Merger is Dubbo's merger for a reference whose group is "*" or a
	// list: how its groups' answers merge (cluster.KeyMerger).
	Merger string `koanf:"merger"`
	// Generic is Dubbo's generic reference (GenericService): each call is
	// made as $invoke with its arguments in generic form (POJOs as maps),
	// and its result comes back so; a caller needs no types of the service.
	Generic bool `koanf:"generic"`
	// Lazy is Dubbo's lazy connect: a provider's connection is made on the
	// first call to it, not when it is referred (the provider counts as
	// available until then).
	Lazy        bool `koanf:"lazy"`
	Connections int  `koanf:"connections"`
	// Tag is Dubbo's reference `tag`: its calls prefer providers with this
	// dubbo.tag (tag routing; a call's own dubbo.tag attachment wins), and
	// fall back to untagged ones unless dubbo.force.tag is true.
	Tag string `koanf:"tag"`
	// Check is Dubbo's `check`: true (the default, as in Dubbo) makes a
	// reference without an available provider fail the App's start, after
	// waiting up to 3 s for one to be listed (dubbo-go's wait), so that a
	// missing dependency shows at deployment, not at the first call; false
	// starts without one and finds providers as they come.
	Check *bool `koanf:"check"`
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
	Routers []Router          `koanf:"routers"`
	Methods map[string]Method `koanf:"methods"`
	Params  map[string]any    `koanf:"params"`
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

// The ranges. Most settings are counts or durations >= 0 whose 0 (or
// absence) means the default; at service, reference and method level it
// means "inherited" from provider.*, consumer.* or the service or reference
// (ruleX), at the top level the default itself (ruleXDefault).
var (
	ruleTimeout, ruleTimeoutDefault   = levels("ms > 0", "1000 ms", "set a positive number of ms or remove the key")
	ruleExecutes, ruleExecutesDefault = levels(">= 0", "no limit", "set the most calls of a method the provider runs at once, or 0")
	ruleActives, ruleActivesDefault   = levels(">= 0", "no limit", "set the most calls of a method in flight to one provider, or 0")
	ruleTPSInterval, _                = levels(">= 0 ms", "60000", "set the length of a tps window in ms, or remove the key")
	ruleRetries                       = valueRule{max: math.MaxInt64, want: ">= 0 (0: no retry; unset: inherited, 2 by default)", fix: "set retries: 0 to never retry, or remove the key"}
	ruleRetriesDefault                = valueRule{max: math.MaxInt64, want: ">= 0 (0: no retry; unset: the default 2)", fix: "set retries: 0 to never retry, or remove the key"}
	ruleTPS                           = atLeast0(">= 0 calls per interval (0 or unset: no limit)", "set how many calls the service takes per tps_interval, or 0")
	ruleWeight                        = atLeast0(">= 0 (0 or unset: the default 100)", "set a relative weight such as 100, or remove the key")
	ruleForks                         = atLeast0(">= 0 (0 or unset: the default 2)", "set how many providers a forking call tries at once, or remove the key")
	ruleConnections                   = atLeast0(">= 0 (0 or unset: one connection shared by the references to the same address)",
		"set how many connections of its own the reference opens, or 0")
	ruleShutdownWait = atLeast0(">= 0 ms (0 or unset: no wait)", "set the ms consumers get to hear of the stop, or 0")
	rulePort         = valueRule{min: 0, max: 65535,
		want: "0..65535 (0 picks a free port)", fix: "set a TCP port such as 20880, or 0"}
	ruleThreads = valueRule{min: 1, max: math.MaxInt64, byPresence: true,
		want: "> 0 (unset: the default 200)", fix: "set the size of the provider's pool, e.g. threads: 200, or remove the key"}
	// The frame's length is a signed 32-bit field on the wire.
	rulePayload = valueRule{min: 1, max: math.MaxInt32, byPresence: true,
		want: "bytes in 1..2147483647, the frame length being a 32-bit field (unset: the default 8388608, 8 MiB)",
		fix:  "set the largest frame in bytes, e.g. payload: 8388608, or remove the key"}
)

// atLeast0 is the rule of a setting that takes any value >= 0.
func atLeast0(want, fix string) valueRule { return valueRule{max: math.MaxInt64, want: want, fix: fix} }

// levels are the rules of a setting >= 0 at service, reference or method
// level (0: inherited) and at the top level (0: the default, dflt).
func levels(want, dflt, fix string) (inherited, top valueRule) {
	return atLeast0(want+" (0 or unset: inherited, "+dflt+" by default)", fix), atLeast0(want+" (0 or unset: "+theDefault(dflt)+")", fix)
}

// theDefault says what a top-level 0 means: no limit, or the default value.
func theDefault(dflt string) string {
	if dflt == "no limit" {
		return dflt
	}
	return "the default " + dflt
}

// Validate reports every numeric setting of cfg that has no meaning
// (a negative timeout, a port out of range, ...) by its key path, in key
// order. set says whether a key was given at all, for the settings whose
// explicit 0 is an error while an unset one takes the default.
//
// Settings given in a `params` map (protocols.<id>.params: heartbeat,
// reconnect; services' and references' params: warmup, hash.nodes, ...)
// reach the URL as strings and are not checked here; the plugin that reads
// one parses it.
func (cfg *Config) Validate(set func(key string) bool) []error {
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
	methods := func(at string, ms map[string]Method) {
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
		switch p.Transporter {
		case "", "netty", "netty4":
		default:
			errs = append(errs, fmt.Errorf("%s.transporter: unknown transporter %q (known: netty, netty4, both weft's transport-netty); set netty or remove the key", path, p.Transporter))
		}
	}

	for id, r := range cfg.Registries {
		check("registries."+id+".weight", r.Weight, ruleWeight)
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

	// Each feature checks its own block.
	errs = append(errs, cfg.QoS.Validate()...)
	errs = append(errs, cfg.Wasm.Validate()...)
	errs = append(errs, cfg.Metrics.Validate()...)
	errs = append(errs, cfg.Tracing.Validate()...)
	if t := cfg.TLS; len(pc.Services) > 0 && !t.Transport().IsZero() && t.TLSCertFile == "" && t.TLSCert == "" {
		// The block turns TLS on for the App's servers too, and a TLS server
		// without a certificate fails every handshake: say so at start.
		errs = append(errs, fmt.Errorf("tls: this App provides services, and with a tls block its servers speak TLS, which needs a certificate: "+
			"set tls-cert-file and tls-key-file (or tls-cert and tls-key); a block with only tls-server-name or ca-cert-file serves a consumer-only App"))
	}
	// Router priorities and WASM filter orders are any int: they only sort.
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return errs
}

// CheckKeysAndValues checks every flattened key (CheckKeys) and, when all
// are known, every value (CheckValue, get giving a key's): one error
// listing the mistakes, separated by "; ", or nil.
func CheckKeysAndValues(keys []string, get func(string) any) error {
	errs := CheckKeys(keys)
	if len(errs) == 0 {
		for _, key := range keys {
			if err := CheckValue(key, get(key)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, len(errs))
	for i, err := range errs {
		msgs[i] = err.Error()
	}
	return errors.New(strings.Join(msgs, "; "))
}

// CheckKeys reports the flattened keys that Config has no place for (see
// CheckKey), each mistake once: a misspelt block (provder:) makes every
// key below it unknown for the same reason.
func CheckKeys(keys []string) []error {
	var errs []error
	seen := map[string]bool{}
	for _, key := range keys {
		if err := CheckKey(key); err != nil && !seen[err.Error()] {
			seen[err.Error()] = true
			errs = append(errs, err)
		}
	}
	return errs
}

// CheckKey reports a flattened key (provider.services.x.timeout) that
// Config has no place for, naming its path and the keys known there.
func CheckKey(key string) error {
	return checkKey(reflect.TypeOf(Config{}), strings.Split(key, "."), "")
}

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

// CheckValue reports a value the key's setting cannot take, in the words
// of the other config errors: the key path, the value, what the key wants
// and its unit (`consumer.timeout: "3s" is not a number of ms`), where the
// decoder would say only that a string did not parse as an int. Strings
// that read as the number or boolean wanted pass: the environment's values
// are all strings. A key CheckKey refuses is not its business.
func CheckValue(key string, v any) error {
	t, tag, ok := leaf(reflect.TypeOf(Config{}), strings.Split(key, "."))
	if !ok || v == nil {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	unit := ""
	if u := tag.Get("unit"); u != "" {
		unit = " of " + u
	}
	bad := func(want string) error {
		return fmt.Errorf("%s: %s is not %s", key, quoteValue(v), want)
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		switch x := v.(type) {
		case int, int64, uint64, int32:
		case float64:
			if x != math.Trunc(x) {
				return bad("a whole number" + unit)
			}
		case string:
			if _, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64); err != nil {
				return bad("a number" + unit)
			}
		default:
			return bad("a number" + unit)
		}
	case reflect.Float32, reflect.Float64:
		switch x := v.(type) {
		case int, int64, uint64, int32, float64:
		case string:
			if _, err := strconv.ParseFloat(strings.TrimSpace(x), 64); err != nil {
				return bad("a number" + unit)
			}
		default:
			return bad("a number" + unit)
		}
	case reflect.Bool:
		switch x := v.(type) {
		case bool:
		case string:
			if _, err := strconv.ParseBool(strings.TrimSpace(x)); err != nil {
				return bad("true or false")
			}
		default:
			return bad("true or false")
		}
	case reflect.String:
		switch v.(type) {
		case map[string]any, []any:
			return bad("a string")
		}
	case reflect.Slice:
		switch v.(type) {
		case []any:
		case string:
			// A comma-separated list from the environment.
		default:
			return bad("a list")
		}
	case reflect.Map, reflect.Struct:
		if _, isMap := v.(map[string]any); !isMap {
			return bad("a block of keys")
		}
	}
	return nil
}

// leaf is the type of the setting at key's path, and its field's tag.
func leaf(t reflect.Type, parts []string) (reflect.Type, reflect.StructTag, bool) {
	var tag reflect.StructTag
	for _, part := range parts {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Struct:
			f, ok := fieldByTag(t, part)
			if !ok {
				return nil, "", false
			}
			t, tag = f.Type, f.Tag
		case reflect.Map:
			t, tag = t.Elem(), ""
		default:
			return nil, "", false
		}
	}
	return t, tag, true
}

func fieldByTag(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		if f := t.Field(i); f.Tag.Get("koanf") == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// quoteValue shows a config value as YAML would: strings quoted, blocks
// and lists by what they are, never whole.
func quoteValue(v any) string {
	switch x := v.(type) {
	case string:
		if len(x) > 64 {
			x = x[:64] + "..."
		}
		return strconv.Quote(x)
	case map[string]any:
		return "a block of keys"
	case []any:
		return "a list"
	}
	return fmt.Sprint(v)
}

// Logger is the App's logger when weft.WithLogger gives none, with
// dubbo-go's key names (`logger.level`, `logger.format`, `logger.appender`,
// `logger.file.name`). The default is what an operator reads at a terminal:
// text lines at info level on stderr.
type Logger struct {
	// Level is debug, info (the default), warn or error.
	Level string `koanf:"level"`
	// Format is text (the default, slog's key=value lines) or json (one
	// object a line, for log collectors).
	Format string `koanf:"format"`
	// Appender is console (the default: stderr) or file (File.Name).
	Appender string     `koanf:"appender"`
	File     LoggerFile `koanf:"file"`
}

// LoggerFile is where a file appender writes. The file is appended
// to and never rotated by weft: the host's log rotation owns old files
// (copytruncate, since weft keeps the file open).
type LoggerFile struct {
	Name string `koanf:"name"`
}

var logLevels = map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}

// NewLogger builds the logger lc describes; the closer, when not nil,
// closes its file. Errors name the key, the known values and the fix.
func (lc Logger) NewLogger() (*slog.Logger, io.Closer, error) {
	level := slog.LevelInfo
	if lc.Level != "" {
		l, ok := logLevels[strings.ToLower(lc.Level)]
		if !ok {
			return nil, nil, fmt.Errorf("weft: config: logger.level: %q is not a level (known: debug, info, warn, error); set one of them or remove the key", lc.Level)
		}
		level = l
	}
	var out io.Writer = os.Stderr
	var closer io.Closer
	switch strings.ToLower(lc.Appender) {
	case "", "console":
	case "file":
		if lc.File.Name == "" {
			return nil, nil, fmt.Errorf("weft: config: logger.file.name: the file appender needs a file; set logger.file.name or use appender: console")
		}
		f, err := os.OpenFile(lc.File.Name, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return nil, nil, fmt.Errorf("weft: config: logger.file.name: %w", err)
		}
		out, closer = f, f
	default:
		return nil, nil, fmt.Errorf("weft: config: logger.appender: %q is not an appender (known: console, file); set one of them or remove the key", lc.Appender)
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	switch strings.ToLower(lc.Format) {
	case "", "text":
		h = slog.NewTextHandler(out, opts)
	case "json":
		h = slog.NewJSONHandler(out, opts)
	default:
		if closer != nil {
			closer.Close()
		}
		return nil, nil, fmt.Errorf("weft: config: logger.format: %q is not a format (known: text, json); set one of them or remove the key", lc.Format)
	}
	return slog.New(h), closer, nil
}

// Listener is an address the App listens on once started, by the key that
// sets its port.
type Listener struct{ Key, Addr string }

// Listeners are the fixed addresses (port not 0) the App listens on once
// started: each network protocol's, QoS's, the metrics exporter's. A check
// that does not start the App (weft run --check) tries them, as a port
// another process holds fails the start and nothing before it.
func (c *Config) Listeners() []Listener {
	var out []Listener
	ids := make([]string, 0, len(c.Protocols))
	for id := range c.Protocols {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		p := c.Protocols[id]
		if p.Port == 0 {
			continue
		}
		host := p.Host
		if host == "" {
			host = "127.0.0.1" // the engine's default (a provider URL's host)
		}
		out = append(out, Listener{"protocols." + id + ".port", net.JoinHostPort(host, strconv.Itoa(p.Port))})
	}
	if c.QoS.Enabled() && c.QoS.ListenPort() != 0 {
		out = append(out, Listener{"qos.port", c.QoS.Addr()})
	}
	if c.Metrics.Enabled() && c.Metrics.Prometheus.Exporter.Enabled && (c.Metrics.Port == nil || *c.Metrics.Port != 0) {
		out = append(out, Listener{"metrics.port", c.Metrics.ExporterAddr()})
	}
	return out
}
