package nacos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/config_client"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// ConfigFactory opens Nacos config centers (extension point
// DynamicConfigurationFactory, name "nacos") from the same address URLs as
// the registry: nacos://127.0.0.1:8848?namespace=dev.
type ConfigFactory struct{ Log *slog.Logger }

var _ extension.DynamicConfigurationFactory = ConfigFactory{}

// GetDynamicConfiguration connects a Nacos config client to the server of url.
func (f ConfigFactory) GetDynamicConfiguration(url *kernel.URL) (extension.DynamicConfiguration, error) {
	log := f.Log
	if log == nil {
		log = slog.Default()
	}
	param, where, err := clientParam(url)
	if err != nil {
		return nil, err
	}
	client, err := clients.NewConfigClient(param)
	if err != nil {
		return nil, fmt.Errorf("nacos: config center %s: %w", where, err)
	}
	return &ConfigCenter{client: client, where: where, log: log.With("config_center", Name),
		watches: map[watchKey]*watch{}}, nil
}

// ConfigCenter is a Nacos config client: documents are Nacos configs, keys
// their data ids. It is safe for concurrent use.
type ConfigCenter struct {
	client config_client.IConfigClient
	where  string
	log    *slog.Logger

	mu      sync.Mutex
	closed  bool
	watches map[watchKey]*watch
}

var _ extension.DynamicConfiguration = (*ConfigCenter)(nil)

type watchKey struct{ key, group string }

// watch is the one SDK listener of a data id, shared by its listeners.
type watch struct {
	key watchKey
	// mu serialises refreshes. The SDK calls back on a new goroutine per
	// change, so two quick changes may arrive out of order; each callback
	// therefore reads the document again and delivers it only if it
	// differs from the last one delivered, so listeners end on the latest.
	mu        sync.Mutex
	listeners extension.Listeners[extension.ConfigListener, string]
}

func group(g string) string {
	if g == "" {
		return extension.DefaultConfigGroup
	}
	return g
}

// GetConfig reads a data id; a missing one is "" without error.
func (c *ConfigCenter) GetConfig(ctx context.Context, key, grp string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	connecting := time.Now().Add(readConnectWait)
	for {
		content, err := c.client.GetConfig(vo.ConfigParam{DataId: key, Group: group(grp)})
		switch {
		case err == nil:
			return content, nil
		case isNotFound(err):
			return "", nil
		case strings.Contains(err.Error(), "is limited"),
			// The SDK's client connects in the background and fails
			// reads while it is STARTING (slow on a loaded machine): wait
			// for it too, up to readConnectWait.
			strings.Contains(err.Error(), "client not connected") && time.Now().Before(connecting):
			// The SDK allows 5 reads of a data id per second per process
			// and fails the rest; wait for its limiter rather than fail.
			select {
			case <-ctx.Done():
				return "", fmt.Errorf("nacos: read config %s (group %s) from %s: %w (and %w)", key, group(grp), c.where, err, ctx.Err())
			case <-time.After(limitedRetry):
			}
		default:
			return "", fmt.Errorf("nacos: read config %s (group %s) from %s: %w", key, group(grp), c.where, err)
		}
	}
}

// limitedRetry is how long a read refused by the SDK's rate limiter (or
// its client not connected yet) waits before it tries again.
const limitedRetry = 250 * time.Millisecond

// readConnectWait bounds how long a read waits for the SDK's client to
// connect (the registry's own start waits connectWait for it, and goes on).
const readConnectWait = 10 * time.Second

// isNotFound tells the SDK's "config data not exist" answer (Nacos and
// PolarisMesh return it as an error) from a failure.
func isNotFound(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "config data not exist") || strings.Contains(msg, "config not found")
}

// PublishConfig writes a data id.
func (c *ConfigCenter) PublishConfig(ctx context.Context, key, grp, content string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if content == "" {
		ok, err := c.client.DeleteConfig(vo.ConfigParam{DataId: key, Group: group(grp)})
		if err := result(ok, err); err != nil {
			return fmt.Errorf("nacos: delete config %s (group %s): %w", key, group(grp), err)
		}
		return nil
	}
	ok, err := c.client.PublishConfig(vo.ConfigParam{DataId: key, Group: group(grp), Content: content, Type: "yaml"})
	if err := result(ok, err); err != nil {
		return fmt.Errorf("nacos: publish config %s (group %s): %w", key, group(grp), err)
	}
	return nil
}

// AddListener watches a data id; l hears every change after this call.
// The server learns of a new watch when the SDK next sends its watches
// (at once when this is the client's first request, else within 5 s).
func (c *ConfigCenter) AddListener(key, grp string, l extension.ConfigListener) error {
	if l == nil {
		return errors.New("nacos: add listener: nil listener")
	}
	k := watchKey{key, group(grp)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errClosed
	}
	if w := c.watches[k]; w != nil {
		w.listeners.Add(l, nil) // changes from now on
		return nil
	}
	w := &watch{key: k}
	w.listeners.Add(l, nil)
	// Held until the current document is known, so that the SDK's first
	// callback (it reports the current content once) compares with it.
	w.mu.Lock()
	defer w.mu.Unlock()
	err := c.client.ListenConfig(vo.ConfigParam{DataId: k.key, Group: k.group,
		OnChange: func(_, _, _, _ string) { c.refresh(w) }})
	if err != nil {
		return fmt.Errorf("nacos: listen to config %s (group %s): %w", k.key, k.group, err)
	}
	// Also the client's first request, if this is its first watch: the
	// connection it opens makes the SDK send its watches at once rather
	// than on its next 5 s round.
	ctx, cancel := context.WithTimeout(context.Background(), refreshTimeout)
	defer cancel()
	if cur, err := c.GetConfig(ctx, key, grp); err == nil {
		w.listeners.Record(cur, nil) // the state changes are told against
	}
	c.watches[k] = w
	return nil
}

// refreshTimeout bounds the read that follows a change.
const refreshTimeout = 10 * time.Second

// deleteConfirm is how long a data id must stay missing to count as deleted.
const deleteConfirm = 2 * time.Second

func (c *ConfigCenter) refresh(w *watch) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), refreshTimeout)
	defer cancel()
	content, err := c.GetConfig(ctx, w.key.key, w.key.group)
	if last, had := w.listeners.Last(); err == nil && content == "" && had && last != "" {
		// PolarisMesh answers "not found" for about a second while it
		// publishes a new version of a data id: a deletion counts only if
		// a second read, a little later, agrees.
		time.Sleep(deleteConfirm)
		content, err = c.GetConfig(ctx, w.key.key, w.key.group)
	}
	if err != nil {
		c.log.Warn("reading a changed config failed; the next change or resync retries", "data_id", w.key.key, "group", w.key.group, "err", err)
		return
	}
	ev := extension.ConfigChangedEvent{Key: w.key.key, Group: w.key.group, Content: content, Deleted: content == ""}
	w.listeners.Deliver(content, func(last string, had bool) bool { return !had || content != last },
		func(l extension.ConfigListener, _ string) { l.Process(ev) })
}

// RemoveListener stops l hearing of the data id; the SDK listener ends with
// the last one.
func (c *ConfigCenter) RemoveListener(key, grp string, l extension.ConfigListener) error {
	k := watchKey{key, group(grp)}
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.watches[k]
	if w == nil {
		return nil
	}
	if w.listeners.Remove(l) > 0 {
		return nil
	}
	delete(c.watches, k)
	return c.client.CancelListenConfig(vo.ConfigParam{DataId: k.key, Group: k.group})
}

// Close ends every watch and the connection; Close is idempotent.
func (c *ConfigCenter) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	for k, w := range c.watches {
		w.listeners.Clear()
		_ = c.client.CancelListenConfig(vo.ConfigParam{DataId: k.key, Group: k.group})
	}
	c.watches = nil
	c.mu.Unlock()
	c.client.CloseClient()
	return nil
}
