package extension

import (
	"context"

	"github.com/weftrpc/weft/kernel"
)

// DefaultConfigGroup is the group config items live in unless the config
// center's address says otherwise, Dubbo's "dubbo".
const DefaultConfigGroup = "dubbo"

// DynamicConfiguration is a config center (Dubbo's DynamicConfiguration):
// documents kept under a key (a Nacos data id) in a group, read at start-up
// and watched while the App runs.
type DynamicConfiguration interface {
	// GetConfig returns the document under key in group; "" and no error
	// when there is none.
	GetConfig(ctx context.Context, key, group string) (string, error)
	// AddListener calls l with every change of key in group until
	// RemoveListener; l is called from one goroutine at a time per key.
	AddListener(key, group string, l ConfigListener) error
	RemoveListener(key, group string, l ConfigListener) error
	// PublishConfig creates or replaces the document (ops tools, tests).
	PublishConfig(ctx context.Context, key, group, content string) error
	Close() error
}

// ConfigChangedEvent is one change of a watched document. Content is the
// whole new document; Deleted says it was removed (Content is then "").
type ConfigChangedEvent struct {
	Key, Group string
	Content    string
	Deleted    bool
}

// ConfigListener receives changes of watched documents.
type ConfigListener interface {
	Process(ev ConfigChangedEvent)
}

// DynamicConfigurationFactory opens a config center from its address URL;
// the URL's protocol names the factory (`nacos://127.0.0.1:8848?namespace=dev`).
type DynamicConfigurationFactory interface {
	GetDynamicConfiguration(url *kernel.URL) (DynamicConfiguration, error)
}
