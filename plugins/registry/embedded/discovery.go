package embedded

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// The embedded registry's application-level discovery keeps an
// application's instances as entries of the registry itself, under a
// group no Dubbo service can have (":" is not allowed in Dubbo's group
// names), so they get the same heartbeats, staleness and file watches as
// provider entries; the interface → application mapping is a folder per
// interface with an empty file per application, which two processes can
// add to at once without losing either.
const (
	instanceGroup = "weft:instances"
	instanceProto = "instance"
	mappingDir    = ".mapping"
)

// DiscoveryFactory opens the embedded registry's application-level
// discovery at the same address as Factory.
type DiscoveryFactory struct{ Log *slog.Logger }

var _ extension.ServiceDiscoveryFactory = DiscoveryFactory{}

// GetServiceDiscovery opens the discovery in the registry folder of u.
func (f DiscoveryFactory) GetServiceDiscovery(u *kernel.URL) (extension.ServiceDiscovery, error) {
	reg, err := Factory{Log: f.Log}.GetRegistry(u)
	if err != nil {
		return nil, err
	}
	return &Discovery{reg: reg.(*Registry), registered: map[string]*kernel.URL{}, subs: map[subKey]*instanceListener{}}, nil
}

// Discovery is the embedded registry's extension.ServiceDiscovery.
type Discovery struct {
	reg *Registry

	mu         sync.Mutex
	registered map[string]*kernel.URL // instance id -> its entry's URL
	subs       map[subKey]*instanceListener
}

type subKey struct {
	app string
	l   extension.InstanceListener
}

var _ extension.ServiceDiscovery = (*Discovery)(nil)

// instanceURL is the entry of an instance: its address, the application as
// the entry's interface, its metadata as parameters.
func instanceURL(in extension.ServiceInstance) *kernel.URL {
	params := make(map[string]string, len(in.Metadata)+2)
	for k, v := range in.Metadata {
		params[k] = v
	}
	params[kernel.KeyInterface] = in.App
	params[kernel.KeyGroup] = instanceGroup
	return kernel.NewURL(instanceProto, in.Host, in.Port, in.App, params)
}

// Register publishes the instance, replacing its earlier entry.
func (d *Discovery) Register(ctx context.Context, in extension.ServiceInstance) error {
	if in.App == "" {
		return errors.New("weft: embedded discovery: an instance needs its application's name")
	}
	u := instanceURL(in)
	d.mu.Lock()
	defer d.mu.Unlock()
	key := in.App + "/" + in.ID()
	if old := d.registered[key]; old != nil && old.String() != u.String() {
		if err := d.reg.Unregister(ctx, old); err != nil {
			return err
		}
	}
	if err := d.reg.Register(ctx, u); err != nil {
		return err
	}
	d.registered[key] = u
	return nil
}

// Unregister removes the instance.
func (d *Discovery) Unregister(ctx context.Context, in extension.ServiceInstance) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	key := in.App + "/" + in.ID()
	old := d.registered[key]
	if old == nil {
		return nil
	}
	delete(d.registered, key)
	return d.reg.Unregister(ctx, old)
}

// instanceListener turns the registry's entry lists into instances.
type instanceListener struct {
	app string
	l   extension.InstanceListener
}

func (il *instanceListener) Notify(urls []*kernel.URL) {
	ins := make([]extension.ServiceInstance, 0, len(urls))
	for _, u := range urls {
		if u.Protocol != instanceProto {
			continue
		}
		meta := u.Params()
		delete(meta, kernel.KeyInterface)
		delete(meta, kernel.KeyGroup)
		ins = append(ins, extension.ServiceInstance{App: il.app, Host: u.Host, Port: u.Port, Metadata: meta})
	}
	sort.Slice(ins, func(i, j int) bool { return ins[i].ID() < ins[j].ID() })
	il.l.NotifyInstances(il.app, ins)
}

func subscriptionURL(app string) *kernel.URL {
	return kernel.NewURL("consumer", "", 0, app, map[string]string{kernel.KeyInterface: app, kernel.KeyGroup: instanceGroup})
}

// Subscribe calls l with app's instances now and after every change.
func (d *Discovery) Subscribe(ctx context.Context, app string, l extension.InstanceListener) error {
	il := &instanceListener{app: app, l: l}
	d.mu.Lock()
	d.subs[subKey{app, l}] = il
	d.mu.Unlock()
	if err := d.reg.Subscribe(ctx, subscriptionURL(app), il); err != nil {
		d.mu.Lock()
		delete(d.subs, subKey{app, l})
		d.mu.Unlock()
		return err
	}
	return nil
}

// Unsubscribe stops l's notifications for app.
func (d *Discovery) Unsubscribe(ctx context.Context, app string, l extension.InstanceListener) error {
	d.mu.Lock()
	il := d.subs[subKey{app, l}]
	delete(d.subs, subKey{app, l})
	d.mu.Unlock()
	if il == nil {
		return nil
	}
	return d.reg.Unsubscribe(ctx, subscriptionURL(app), il)
}

func (d *Discovery) mappingFolder(iface string) string {
	return filepath.Join(d.reg.Dir(), mappingDir, url.PathEscape(iface))
}

// Mapping lists the applications mapped to the interface.
func (d *Discovery) Mapping(_ context.Context, iface string) ([]string, error) {
	entries, err := os.ReadDir(d.mappingFolder(iface))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("weft: embedded discovery: mapping of %s: %w", iface, err)
	}
	var apps []string
	for _, e := range entries {
		if app, err := url.PathUnescape(e.Name()); err == nil && !strings.HasPrefix(e.Name(), ".") {
			apps = append(apps, app)
		}
	}
	sort.Strings(apps)
	return apps, nil
}

// AddMapping maps the interface to app.
func (d *Discovery) AddMapping(_ context.Context, iface, app string) error {
	dir := d.mappingFolder(iface)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("weft: embedded discovery: mapping of %s: %w", iface, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, url.PathEscape(app)), os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("weft: embedded discovery: map %s to %s: %w", iface, app, err)
	}
	return f.Close()
}

// Close unregisters this process's instances and closes the registry.
func (d *Discovery) Close() error { return d.reg.Close() }
