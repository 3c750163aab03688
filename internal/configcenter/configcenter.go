// Package configcenter is an App's view of its config-center document
// (Dubbo's config-center): found by the extension its address names, read
// and merged over the local config at start, and watched while the App runs.
package configcenter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/weftrpc/weft/config"
	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/internal/optin"
	"github.com/weftrpc/weft/kernel"
)

// Merge composes the App's config from the local sources and a document of
// the config center: the root package's loader (files, then the document,
// then WEFT_* variables), which this package does not know.
type Merge func(content string) (*config.Config, error)

// Center is the App's view of its config center document. It
// watches the document from before the first read, so no change is missed
// between New and Start: the runtime attaches at start and hears the
// latest change made since the merge.
type Center struct {
	dc         extension.DynamicConfiguration
	url        *kernel.URL
	key, group string
	merge      Merge

	mu      sync.Mutex
	merged  string // the document New merged
	latest  *extension.ConfigChangedEvent
	handler func(extension.ConfigChangedEvent)
}

// Process hears the document's changes.
func (c *Center) Process(ev extension.ConfigChangedEvent) {
	c.mu.Lock()
	c.latest = &ev
	h := c.handler
	c.mu.Unlock()
	if h != nil {
		h(ev)
	}
}

// Attach sends changes to h from now on (nil: nowhere), starting with one
// made since New read the document.
func (c *Center) Attach(h func(extension.ConfigChangedEvent)) {
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

// Where names the document and the config center, for errors and logs.
func (c *Center) Where() string {
	return fmt.Sprintf("data id %q (group %s) at %s", c.key, c.group, c.url.Address())
}

// Merge composes the App's config from the local sources and content. The
// document is checked alone first so that its errors name it.
func (c *Center) Merge(content string) (*config.Config, error) {
	cfg, err := c.merge(content)
	if err != nil {
		return nil, fmt.Errorf("weft: config center %s: %w", c.Where(), err)
	}
	return cfg, nil
}

// Merged says whether Open merged a (non-empty) document; with check:
// false it may not have been read.
func (c *Center) Merged() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.merged != ""
}

// Close closes the config center.
func (c *Center) Close() error { return c.dc.Close() }

// readTimeout bounds the start-up read of the document.
const readTimeout = 10 * time.Second

// Open returns the App's *Config: local, or, with a config_center, local
// merged with the document read now. The config center stays open (its
// owner closes it after everything else) so that the runtime can watch the
// document; nil without one.
func Open(local *config.Config, merge Merge, factories *kernel.Loader[extension.DynamicConfigurationFactory],
	log *slog.Logger) (*config.Config, *Center, error) {
	cc := local.ConfigCenter
	if cc.Address == "" {
		if cc != (config.Center{Check: cc.Check}) {
			return nil, nil, errors.New("weft: config: config_center: address is required, e.g. nacos://127.0.0.1:8848")
		}
		return local, nil, nil
	}
	u, err := kernel.ParseURL(cc.Address)
	if err != nil {
		return nil, nil, fmt.Errorf("weft: config: config_center.address: %w", err)
	}
	f, err := factories.Get(u.Protocol)
	if err != nil {
		if e := optin.NotAdded("config center", u.Protocol, factories.Names()); e != nil {
			err = e
		}
		return nil, nil, fmt.Errorf("weft: config: config_center.address: %w", err)
	}
	key := cc.DataID
	if key == "" {
		key = local.Application.Name
	}
	if key == "" {
		return nil, nil, errors.New("weft: config: config_center.data_id: the document's key is required (or set application.name, its default)")
	}
	group := cc.Group
	if group == "" {
		group = extension.DefaultConfigGroup
	}
	if u.Param(kernel.KeyApplication) == "" && local.Application.Name != "" {
		u = u.WithParam(kernel.KeyApplication, local.Application.Name)
	}
	dc, err := f.GetDynamicConfiguration(u)
	if err != nil {
		return nil, nil, fmt.Errorf("weft: config_center %s: %w", u.Address(), err)
	}
	c := &Center{dc: dc, url: u, key: key, group: group, merge: merge}
	if err := dc.AddListener(key, group, c); err != nil {
		dc.Close()
		return nil, nil, fmt.Errorf("weft: config_center: watch %s: %w", c.Where(), err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	content, err := dc.GetConfig(ctx, key, group)
	if err != nil {
		if cc.Check == nil || *cc.Check {
			dc.Close()
			return nil, nil, fmt.Errorf("weft: config_center: reading %s: %w (set config_center.check: false to start without it)", c.Where(), err)
		}
		log.Warn("weft: config center unreachable; starting from the local config, the document applies once it can be read",
			"config_center", c.Where(), "err", err)
		return local, c, nil
	}
	cfg, err := c.Merge(content)
	if err != nil {
		dc.Close()
		return nil, nil, err
	}
	c.merged = content
	log.Info("weft: config merged from the config center", "config_center", c.Where(), "bytes", len(content))
	return cfg, c, nil
}

// Latest is the latest version of the document heard, zero before any.
func (c *Center) Latest() extension.ConfigChangedEvent {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.latest == nil {
		return extension.ConfigChangedEvent{}
	}
	return *c.latest
}

// URL is the config center's address.
func (c *Center) URL() *kernel.URL { return c.url }

// Dynamic is the open config center, where governance rules are read too.
func (c *Center) Dynamic() extension.DynamicConfiguration { return c.dc }
