package cluster

import (
	"context"
	"sync/atomic"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// StaticDirectory is a fixed list of invokers: the providers named by a
// reference's `url` setting, or a single in-process one.
type StaticDirectory struct {
	url       *kernel.URL
	invokers  []kernel.Invoker
	destroyed atomic.Bool
}

// NewStaticDirectory lists invokers for the consumer URL url.
func NewStaticDirectory(url *kernel.URL, invokers []kernel.Invoker) *StaticDirectory {
	return &StaticDirectory{url: url, invokers: append([]kernel.Invoker(nil), invokers...)}
}

var _ extension.Directory = (*StaticDirectory)(nil)

// URL is the consumer URL.
func (d *StaticDirectory) URL() *kernel.URL { return d.url }

// List returns the available invokers. It allocates only when some invoker is
// unavailable.
func (d *StaticDirectory) List(context.Context, *kernel.Invocation) ([]kernel.Invoker, error) {
	if d.destroyed.Load() {
		return nil, kernel.Errorf(kernel.CodeNoProvider, "directory of %s is destroyed", d.url.ServiceKey())
	}
	for i, iv := range d.invokers {
		if !iv.IsAvailable() {
			out := append([]kernel.Invoker(nil), d.invokers[:i]...)
			for _, rest := range d.invokers[i+1:] {
				if rest.IsAvailable() {
					out = append(out, rest)
				}
			}
			return out, nil
		}
	}
	return d.invokers, nil
}

// IsAvailable reports whether any invoker is.
func (d *StaticDirectory) IsAvailable() bool {
	if d.destroyed.Load() {
		return false
	}
	for _, iv := range d.invokers {
		if iv.IsAvailable() {
			return true
		}
	}
	return false
}

// Destroy destroys every invoker.
func (d *StaticDirectory) Destroy() {
	if d.destroyed.Swap(true) {
		return
	}
	for _, iv := range d.invokers {
		iv.Destroy()
	}
}
