package weft

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/env"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"

	"github.com/weftrpc/weft/config"
	wasmfilter "github.com/weftrpc/weft/filters-wasm"
	"github.com/weftrpc/weft/plugins/filter/metrics"
	"github.com/weftrpc/weft/plugins/filter/tracing"
	"github.com/weftrpc/weft/qos"
)

// The configuration's types live beside what they configure (package
// config, and each feature's own block in its package); these names keep
// weft.Config and its parts where programs find them.
type (
	// Config is what an App is composed from (config.Config).
	Config             = config.Config
	ApplicationConfig  = config.Application
	ProtocolConfig     = config.Protocol
	RegistryConfig     = config.Registry
	MethodConfig       = config.Method
	RouterConfig       = config.Router
	TagConfig          = config.Tag
	ProviderConfig     = config.Provider
	ShutdownConfig     = config.Shutdown
	ServiceConfig      = config.Service
	ConsumerConfig     = config.Consumer
	ReferenceConfig    = config.Reference
	TLSConfig          = config.TLS
	ConfigCenterConfig = config.Center
	LoggerConfig       = config.Logger
	LoggerFileConfig   = config.LoggerFile
	WasmConfig         = wasmfilter.Settings
	WasmFilterConfig   = wasmfilter.FilterSettings
	QoSConfig          = qos.Settings
	MetricsConfig      = metrics.Config
	TracingConfig      = tracing.Config
)

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
// there, and so is a value out of its range (see config.Config.Validate). The config
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
			if name, ok := wasmfilter.PathKey(key); ok {
				wasmFrom[name] = string(file)
			}
		}
		if err := k.Merge(one); err != nil {
			return nil, fmt.Errorf("weft: config: %w", err)
		}
	}
	keys := k.Keys()
	errs := config.CheckKeys(keys)
	if len(errs) == 0 {
		for _, key := range keys {
			if err := config.CheckValue(key, k.Get(key)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		msgs := make([]string, len(errs))
		for i, err := range errs {
			msgs[i] = err.Error()
		}
		return nil, fmt.Errorf("weft: config: %s", strings.Join(msgs, "; "))
	}
	var cfg Config
	if err := k.UnmarshalWithConf("", &cfg, koanf.UnmarshalConf{Tag: "koanf"}); err != nil {
		return nil, fmt.Errorf("weft: config: %w", err)
	}
	if errs := cfg.Validate(k.Exists); len(errs) > 0 {
		return nil, fmt.Errorf("weft: config: %w", errors.Join(errs...))
	}
	if err := cfg.Wasm.ResolvePaths(wasmFrom); err != nil {
		return nil, err
	}
	return &cfg, nil
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
