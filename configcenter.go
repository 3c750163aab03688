package weft

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/v2"
	"go.uber.org/fx"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// localConfig is what New read before any config center: the sources in
// order (files, in-memory YAML) and whether WEFT_* variables go on top.
type localConfig struct {
	sources []ConfigSource
	env     bool
	cfg     *Config
}

// configCenter is the App's view of its config center document. It
// watches the document from before the first read, so no change is missed
// between New and Start: the runtime attaches at start and hears the
// latest change made since the merge.
type configCenter struct {
	dc         extension.DynamicConfiguration
	url        *kernel.URL
	key, group string
	local      localConfig

	mu      sync.Mutex
	merged  string // the document New merged
	latest  *extension.ConfigChangedEvent
	handler func(extension.ConfigChangedEvent)
}

// Process hears the document's changes.
func (c *configCenter) Process(ev extension.ConfigChangedEvent) {
	c.mu.Lock()
	c.latest = &ev
	h := c.handler
	c.mu.Unlock()
	if h != nil {
		h(ev)
	}
}

// attach sends changes to h from now on (nil: nowhere), starting with one
// made since New read the document.
func (c *configCenter) attach(h func(extension.ConfigChangedEvent)) {
	c.mu.Lock()
	c.handler = h
	pending := c.latest
	if pending != nil && pending.Content == c.merged {
		pending = nil
	}
	c.mu.Unlock()
	if h != nil && pending != nil {
		h(*pending)
	}
}

// remoteSource is the config center's document as a config layer; merge
// names the document in its errors.
type remoteSource string

func (r remoteSource) load(k *koanf.Koanf) error {
	return k.Load(bytesProvider(r), yaml.Parser())
}

func (c *configCenter) where() string {
	return fmt.Sprintf("data id %q (group %s) at %s", c.key, c.group, c.url.Address())
}

// merge composes the App's config from the local sources and the document:
// files, then the document, then WEFT_* variables (an operator's override
// beats the config center, as a flag would). The document is checked alone
// first so that its errors name it.
func (c *configCenter) merge(content string) (*Config, error) {
	doc := remoteSource(content)
	alone, err := LoadConfig(doc)
	if err != nil {
		return nil, fmt.Errorf("weft: config center %s: %w", c.where(), err)
	}
	if alone.ConfigCenter != (ConfigCenterConfig{}) {
		return nil, fmt.Errorf("weft: config center %s: config_center cannot be set from the config center itself", c.where())
	}
	sources := append(append([]ConfigSource(nil), c.local.sources...), doc)
	if c.local.env {
		sources = append(sources, ConfigEnv())
	}
	return LoadConfig(sources...)
}

// readTimeout bounds the start-up read of the document.
const readTimeout = 10 * time.Second

// resolveConfig is the App's *Config: the local one, or, with a
// config_center, the local one merged with the document read now. The
// config center stays open (and is closed after everything else) so that
// the runtime can watch the document.
func resolveConfig(local localConfig, factories *kernel.Loader[extension.DynamicConfigurationFactory],
	log *slog.Logger, lc fx.Lifecycle, cl *closers) (*Config, *configCenter, error) {
	cc := local.cfg.ConfigCenter
	if cc.Address == "" {
		if cc != (ConfigCenterConfig{Check: cc.Check}) {
			return nil, nil, errors.New("weft: config: config_center: address is required, e.g. nacos://127.0.0.1:8848")
		}
		return local.cfg, nil, nil
	}
	u, err := kernel.ParseURL(cc.Address)
	if err != nil {
		return nil, nil, fmt.Errorf("weft: config: config_center.address: %w", err)
	}
	f, err := factories.Get(u.Protocol)
	if err != nil {
		if e := notAdded("config center", u.Protocol, factories.Names()); e != nil {
			err = e
		}
		return nil, nil, fmt.Errorf("weft: config: config_center.address: %w", err)
	}
	key := cc.DataID
	if key == "" {
		key = local.cfg.Application.Name
	}
	if key == "" {
		return nil, nil, errors.New("weft: config: config_center.data_id: the document's key is required (or set application.name, its default)")
	}
	group := cc.Group
	if group == "" {
		group = extension.DefaultConfigGroup
	}
	if u.Param(kernel.KeyApplication) == "" && local.cfg.Application.Name != "" {
		u = u.WithParam(kernel.KeyApplication, local.cfg.Application.Name)
	}
	dc, err := f.GetDynamicConfiguration(u)
	if err != nil {
		return nil, nil, fmt.Errorf("weft: config_center %s: %w", u.Address(), err)
	}
	c := &configCenter{dc: dc, url: u, key: key, group: group, local: local}
	// Closed after everything else when the App stops, or by New if a later
	// part of the App fails to build.
	lc.Append(fx.StopHook(dc.Close))
	cl.add(func(context.Context) error { return dc.Close() })
	if err := dc.AddListener(key, group, c); err != nil {
		dc.Close()
		return nil, nil, fmt.Errorf("weft: config_center: watch %s: %w", c.where(), err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	content, err := dc.GetConfig(ctx, key, group)
	if err != nil {
		if cc.Check == nil || *cc.Check {
			dc.Close()
			return nil, nil, fmt.Errorf("weft: config_center: reading %s: %w (set config_center.check: false to start without it)", c.where(), err)
		}
		log.Warn("weft: config center unreachable; starting from the local config, the document applies once it can be read",
			"config_center", c.where(), "err", err)
		return local.cfg, c, nil
	}
	cfg, err := c.merge(content)
	if err != nil {
		dc.Close()
		return nil, nil, err
	}
	c.merged = content
	log.Info("weft: config merged from the config center", "config_center", c.where(), "bytes", len(content))
	return cfg, c, nil
}
