package weft

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/env"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/providers/rawbytes"
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
	return loadYAML(k, file.Provider(string(f)), "config file "+string(f))
}

type yamlSource []byte

func (y yamlSource) load(k *koanf.Koanf) error {
	return loadYAML(k, rawbytes.Provider(y), "config yaml")
}

// loadYAML loads a YAML document, its placeholders resolved and a dubbo-go
// config put in weft's keys (config.Prepare).
func loadYAML(k *koanf.Koanf, p koanf.Provider, what string) error {
	one := koanf.New(".")
	err := one.Load(p, yaml.Parser())
	var doc map[string]any
	if err == nil {
		doc, err = config.Prepare(one.Raw(), os.LookupEnv)
	}
	if err == nil {
		err = k.Load(confmap.Provider(doc, ""), nil)
	}
	if err != nil {
		return fmt.Errorf("weft: %s: %w", what, err)
	}
	return nil
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
	// from is, by key, the config file that last set it ("" for a YAML
	// string or the environment): each source is loaded on its own, then
	// merged, so that which keys it set is known (config.ResolvePaths).
	from := map[string]string{}
	for _, s := range sources {
		one := koanf.New(".")
		if err := s.load(one); err != nil {
			return nil, err
		}
		file, _ := s.(fileSource)
		for _, key := range one.Keys() {
			from[key] = string(file)
		}
		if err := k.Merge(one); err != nil {
			return nil, fmt.Errorf("weft: config: %w", err)
		}
	}
	if err := config.CheckKeysAndValues(k.Keys(), k.Get); err != nil {
		return nil, fmt.Errorf("weft: config: %w", err)
	}
	var cfg Config
	if err := k.UnmarshalWithConf("", &cfg, koanf.UnmarshalConf{Tag: "koanf"}); err != nil {
		return nil, fmt.Errorf("weft: config: %w", err)
	}
	if errs := cfg.Validate(k.Exists); len(errs) > 0 {
		return nil, fmt.Errorf("weft: config: %w", errors.Join(errs...))
	}
	if err := cfg.ResolvePaths(from); err != nil {
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
