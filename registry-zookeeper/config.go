package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// ConfigFactory opens ZooKeeper config centers (extension point
// DynamicConfigurationFactory, name "zookeeper") from the same address
// URLs as the registry.
type ConfigFactory struct{ Log *slog.Logger }

var _ extension.DynamicConfigurationFactory = ConfigFactory{}

// paramNamespace is Dubbo's name for the config root (TreePathDynamic-
// Configuration's CONFIG_NAMESPACE_KEY); group is accepted too, as the
// registry's root parameter.
const paramNamespace = "namespace"

// GetDynamicConfiguration opens a session with the servers of url. Its
// documents live under /<namespace, else group, else dubbo>/config.
func (f ConfigFactory) GetDynamicConfiguration(url *kernel.URL) (extension.DynamicConfiguration, error) {
	log := f.Log
	if log == nil {
		log = slog.Default()
	}
	log = log.With("config_center", Name)
	c, err := dial(url, log, "config center")
	if err != nil {
		return nil, err
	}
	ns := url.ParamOr(paramNamespace, url.ParamOr(kernel.KeyGroup, DefaultRoot))
	root := "/" + strings.Trim(ns, "/") + "/config"
	return &ConfigCenter{owner: newOwner[extension.ConfigListener, *watch](c, log, errConfigClosed), root: root}, nil
}

// ConfigCenter keeps documents as node data, at <root>/<group>/<key>. It is
// safe for concurrent use.
type ConfigCenter struct {
	// owner's watches are the documents', by node path.
	owner[extension.ConfigListener, *watch]
	root string
}

var _ extension.DynamicConfiguration = (*ConfigCenter)(nil)

var errConfigClosed = errors.New("zookeeper: config center closed")

// Path is the node of key in group ("" is Dubbo's group "dubbo").
func (c *ConfigCenter) Path(key, group string) (string, error) {
	if group == "" {
		group = extension.DefaultConfigGroup
	}
	for _, part := range []string{group, key} {
		if part == "" || strings.Contains(part, "/") || part == "." || part == ".." || strings.ContainsRune(part, 0) {
			return "", fmt.Errorf("zookeeper: config key %q in group %q: each must be a non-empty node name without /", clip(key), clip(group))
		}
	}
	return c.root + "/" + group + "/" + key, nil
}

// GetConfig reads a document; a missing one is "" without error.
func (c *ConfigCenter) GetConfig(ctx context.Context, key, group string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	path, err := c.Path(key, group)
	if err != nil {
		return "", err
	}
	data, _, err := c.c.conn.Get(path)
	if errors.Is(err, zk.ErrNoNode) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("zookeeper: read %s at %s: %w", path, c.c.where, err)
	}
	if len(data) > maxDocument {
		return "", fmt.Errorf("zookeeper: %s at %s holds %d bytes, over the %d-byte limit of a config document", path, c.c.where, len(data), maxDocument)
	}
	return string(data), nil
}

// PublishConfig writes a document, creating its node and parents; an empty
// content deletes it (as the Nacos config center does).
func (c *ConfigCenter) PublishConfig(ctx context.Context, key, group, content string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	path, err := c.Path(key, group)
	if err != nil {
		return err
	}
	if content == "" {
		if err := c.c.conn.Delete(path, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return fmt.Errorf("zookeeper: delete %s at %s: %w", path, c.c.where, err)
		}
		return nil
	}
	if len(content) > maxDocument {
		return fmt.Errorf("zookeeper: publish %s: %d bytes is over the %d-byte limit of a config document", path, len(content), maxDocument)
	}
	for attempt := 0; ; attempt++ {
		_, err := c.c.conn.Set(path, []byte(content), -1)
		if err == nil {
			return nil
		}
		if !errors.Is(err, zk.ErrNoNode) || attempt > 2 {
			return fmt.Errorf("zookeeper: publish %s at %s: %w", path, c.c.where, err)
		}
		if err := c.c.createParents(path); err != nil {
			return fmt.Errorf("zookeeper: publish %s at %s: %w", path, c.c.where, err)
		}
		_, err = c.c.conn.Create(path, []byte(content), 0, c.c.acl)
		if err == nil {
			return nil
		}
		// Another writer created it meanwhile: the next Set replaces its
		// content, as a later publish would.
		if !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("zookeeper: publish %s at %s: %w", path, c.c.where, err)
		}
	}
}

// watch is the one data watch of a document, shared by its listeners.
type watch struct {
	// shared's listeners' last value is what they were last told (or the
	// state at AddListener).
	shared[extension.ConfigListener, docState]
	key, group, path string
}

// docState is a document as its listeners last heard of it.
type docState struct {
	content string
	present bool
}

// AddListener watches a document: l hears every change after this call
// (the whole new content; Deleted when the node goes), including one
// created after being absent and changes made while a session expired.
func (c *ConfigCenter) AddListener(key, group string, l extension.ConfigListener) error {
	if l == nil {
		return errors.New("zookeeper: add listener: nil listener")
	}
	path, err := c.Path(key, group)
	if err != nil {
		return err
	}
	if group == "" {
		group = extension.DefaultConfigGroup
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errConfigClosed
	}
	if w := c.watches[path]; w != nil {
		w.listeners.Add(l, nil) // changes from now on
		return nil
	}
	w := &watch{shared: newShared[extension.ConfigListener, docState](), key: key, group: group, path: path}
	w.listeners.Add(l, nil)
	up := c.c.reconnected() // see run
	content, present, ch, err := c.read(path)
	if err != nil {
		return fmt.Errorf("zookeeper: watch %s at %s: %w", path, c.c.where, err)
	}
	w.listeners.Record(docState{content, present}, nil) // the state changes are told against
	c.watches[path] = w
	c.wg.Add(1)
	go c.run(w, ch, up)
	return nil
}

// read returns a document and arms a watch on it: a data watch if it
// exists, an existence watch (which fires on creation) if not.
func (c *ConfigCenter) read(path string) (content string, present bool, ch <-chan zk.Event, err error) {
	for {
		data, _, dch, err := c.c.conn.GetW(path)
		if err == nil {
			if len(data) > maxDocument {
				return "", true, dch, fmt.Errorf("%s holds %d bytes, over the %d-byte limit of a config document", path, len(data), maxDocument)
			}
			return string(data), true, dch, nil
		}
		if !errors.Is(err, zk.ErrNoNode) {
			return "", false, nil, err
		}
		exists, _, ech, err := c.c.conn.ExistsW(path)
		if err != nil {
			return "", false, nil, err
		}
		if !exists {
			return "", false, ech, nil
		}
		// Created between the two calls: read it.
	}
}

// run re-reads w's document after every event, and after every reconnect,
// until w stops (see client.follow), and tells the listeners when it
// differs from what they last heard.
func (c *ConfigCenter) run(w *watch, ch <-chan zk.Event, up <-chan struct{}) {
	defer c.wg.Done()
	c.c.follow("config watch", w.path, w.stop, c.stop, up, ch, func() (<-chan zk.Event, error) {
		content, present, next, err := c.read(w.path)
		if err != nil && next != nil {
			// Read but refused (oversized): the listeners keep the last
			// version, and the watch waits for the next one.
			c.log.Warn("config document ignored", "node", w.path, "err", err)
			return next, nil
		}
		if err == nil {
			c.deliver(w, content, present)
		}
		return next, err
	})
}

func (c *ConfigCenter) deliver(w *watch, content string, present bool) {
	now := docState{content, present}
	// Told outside the lock: a listener may remove itself.
	ls := w.listeners.Record(now, func(last docState, _ bool) bool { return last != now })
	ev := extension.ConfigChangedEvent{Key: w.key, Group: w.group, Content: content, Deleted: !present}
	for _, l := range ls {
		l.Process(ev)
	}
}

// RemoveListener stops l hearing of the document; the watch ends with the
// last listener.
func (c *ConfigCenter) RemoveListener(key, group string, l extension.ConfigListener) error {
	path, err := c.Path(key, group)
	if err != nil {
		return err
	}
	return c.unwatch(path, l)
}

// Close ends every watch and the session; Close is idempotent.
func (c *ConfigCenter) Close() error {
	c.shut()
	return nil
}
