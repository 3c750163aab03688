// Package testcc is a config center in memory for weft's tests of rule
// documents: what a test publishes reaches the key's listeners at once, on
// the publisher's goroutine, so a test knows a rule was seen when
// PublishConfig returns. It is test support only; nothing of the framework
// imports it (TestLayering lets tests do).
package testcc

import (
	"context"
	"slices"
	"sync"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// Center is an extension.DynamicConfiguration in memory, and the factory
// that gives it (a plugin's config center).
type Center struct {
	mu   sync.Mutex
	docs map[string]string
	ls   map[string][]extension.ConfigListener
}

var (
	_ extension.DynamicConfiguration        = (*Center)(nil)
	_ extension.DynamicConfigurationFactory = (*Center)(nil)
)

// New returns an empty center.
func New() *Center {
	return &Center{docs: map[string]string{}, ls: map[string][]extension.ConfigListener{}}
}

// GetDynamicConfiguration is the center itself, whatever the URL.
func (c *Center) GetDynamicConfiguration(*kernel.URL) (extension.DynamicConfiguration, error) {
	return c, nil
}

// GetConfig is the document under key and group ("" when none).
func (c *Center) GetConfig(_ context.Context, key, group string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.docs[key+"/"+group], nil
}

// AddListener adds l to the listeners of key and group.
func (c *Center) AddListener(key, group string, l extension.ConfigListener) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ls[key+"/"+group] = append(c.ls[key+"/"+group], l)
	return nil
}

// RemoveListener removes l from the listeners of key and group.
func (c *Center) RemoveListener(key, group string, l extension.ConfigListener) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ls[key+"/"+group] = slices.DeleteFunc(c.ls[key+"/"+group], func(x extension.ConfigListener) bool { return x == l })
	return nil
}

// PublishConfig stores content under key and group and tells their
// listeners before it returns; "" deletes the document.
func (c *Center) PublishConfig(_ context.Context, key, group, content string) error {
	c.mu.Lock()
	c.docs[key+"/"+group] = content
	ls := slices.Clone(c.ls[key+"/"+group])
	c.mu.Unlock()
	for _, l := range ls {
		l.Process(extension.ConfigChangedEvent{Key: key, Group: group, Content: content, Deleted: content == ""})
	}
	return nil
}

// Listening reports whether anyone listens to key and group.
func (c *Center) Listening(key, group string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.ls[key+"/"+group]) > 0
}

// Listened is the "key/group" pairs listened to now, sorted.
func (c *Center) Listened() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for k, ls := range c.ls {
		if len(ls) > 0 {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// Close does nothing: the center lives as long as the test.
func (c *Center) Close() error { return nil }
