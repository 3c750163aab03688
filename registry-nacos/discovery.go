package nacos

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// Application-level service discovery (Dubbo 3) on Nacos, laid out as Java
// Dubbo's NacosServiceDiscovery and dubbo-go's registry/nacos register it,
// so that each reads the others' instances:
//
//   - an instance is a Nacos instance of the service named after the
//     application, in the group of the address URL's group parameter
//     (default DEFAULT_GROUP), with the instance's host and port, its
//     metadata as the Nacos metadata plus dubbo-go's "id" key (host:port),
//     ephemeral, healthy, enabled, weight 1 unless the metadata says
//     otherwise;
//   - the interface → application mapping is the config of data id =
//     interface in group "mapping", its content the applications joined by
//     commas (Java's and dubbo-go's NacosMetadataReport).
const (
	// metaID is dubbo-go's key of the instance id in the metadata (its Go
	// Nacos client has no instance id of its own).
	metaID = "id"
	// metaWeight, when an instance's metadata has it, is its Nacos weight.
	metaWeight = kernel.KeyWeight
	// MappingGroup is the config group of the mapping documents.
	MappingGroup = "mapping"

	// What is read from the server is bounded: instances of one
	// application, metadata entries of one instance, and the mapping.
	maxInstances    = 10000
	maxMetaEntries  = 1024
	maxMappingBytes = 64 << 10
	maxMappingApps  = 1024
	maxAppName      = 256

	// mappingAttempts bounds AddMapping's read-modify-write rounds;
	// mappingBackoff spaces them out when another writer got in first.
	mappingAttempts = 8
	mappingBackoff  = 100 * time.Millisecond
	// mappingSettle is how long AddMapping waits after an unconditional
	// write (a server without compare-and-set, below) before it reads the
	// document again to check that no other writer's change replaced it:
	// PolarisMesh serves a new version of a data id about a second after
	// the write, and the check must see the other writer's write too.
	mappingSettle = 3 * time.Second
)

// DiscoveryFactory opens Nacos application-level discoveries (extension
// point ServiceDiscoveryFactory, name "nacos") from the registry's address
// URL: nacos://127.0.0.1:8848?namespace=dev&group=DEFAULT_GROUP.
type DiscoveryFactory struct{ Log *slog.Logger }

var _ extension.ServiceDiscoveryFactory = DiscoveryFactory{}

// GetServiceDiscovery connects a naming client (instances) and a config
// client (the mapping) to the server of url.
func (f DiscoveryFactory) GetServiceDiscovery(url *kernel.URL) (extension.ServiceDiscovery, error) {
	if url == nil {
		return nil, errors.New("nacos: nil registry URL")
	}
	log := f.Log
	if log == nil {
		log = slog.Default()
	}
	client, _, where, err := newNamingClient(url)
	if err != nil {
		return nil, err
	}
	cfg, err := ConfigFactory{Log: log}.GetDynamicConfiguration(url)
	if err != nil {
		client.CloseClient()
		return nil, fmt.Errorf("nacos: service discovery (the mapping's config client): %w", err)
	}
	group := url.ParamOr(kernel.KeyGroup, Group)
	log.Info("nacos service discovery connected", "server", where, "namespace", url.Param("namespace"), "group", group)
	return &Discovery{
		naming: naming[extension.InstanceListener, []extension.ServiceInstance]{
			client: client, group: group, where: where, log: log.With("discovery", Name),
			kind: "application", errClosed: errDiscoveryClosed, value: serviceInstances,
			notify: func(app string, l extension.InstanceListener, ins []extension.ServiceInstance) {
				l.NotifyInstances(app, ins)
			},
			subs: map[string]*subscription[extension.InstanceListener, []extension.ServiceInstance]{},
		},
		cfg:        cfg.(*ConfigCenter),
		registered: map[string]map[string]extension.ServiceInstance{},
	}, nil
}

// Discovery is the Nacos extension.ServiceDiscovery. It is safe for
// concurrent use.
type Discovery struct {
	// naming's subscriptions are to applications (a service each, named
	// after it, in the URL's group); its mu guards registered too.
	naming[extension.InstanceListener, []extension.ServiceInstance]
	cfg *ConfigCenter
	// noCAS is set once the server is seen to refuse compare-and-set
	// publishes that match what it serves (PolarisMesh, below).
	noCAS atomic.Bool

	// registered: application -> instance id -> instance. One client
	// publishes one instance per service unless it batch-registers, so
	// an application's instances are (re)published together.
	registered map[string]map[string]extension.ServiceInstance
}

var _ extension.ServiceDiscovery = (*Discovery)(nil)

var errDiscoveryClosed = errors.New("nacos: service discovery closed")

// Register publishes the instance, or replaces its metadata when this
// client registered it already (Nacos replaces an instance registered
// again at the same address).
func (d *Discovery) Register(ctx context.Context, in extension.ServiceInstance) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if in.App == "" || in.Host == "" || in.Port <= 0 {
		return fmt.Errorf("nacos: register instance %s: it needs an application name, a host and a port", in.ID())
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return errDiscoveryClosed
	}
	cur := d.registered[in.App]
	next := make(map[string]extension.ServiceInstance, len(cur)+1)
	for k, v := range cur {
		next[k] = v
	}
	next[in.ID()] = in
	if err := d.publish(in.App, next, nil); err != nil {
		return fmt.Errorf("nacos: register instance %s of %s (group %s) at %s: %w", in.ID(), in.App, d.group, d.where, err)
	}
	d.registered[in.App] = next
	return nil
}

// Unregister withdraws the instance.
func (d *Discovery) Unregister(ctx context.Context, in extension.ServiceInstance) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return errDiscoveryClosed
	}
	cur := d.registered[in.App]
	if _, ok := cur[in.ID()]; !ok {
		return nil
	}
	next := make(map[string]extension.ServiceInstance, len(cur))
	for k, v := range cur {
		if k != in.ID() {
			next[k] = v
		}
	}
	if err := d.publish(in.App, next, &in); err != nil {
		return fmt.Errorf("nacos: unregister instance %s of %s at %s: %w", in.ID(), in.App, d.where, err)
	}
	if len(next) == 0 {
		delete(d.registered, in.App)
	} else {
		d.registered[in.App] = next
	}
	return nil
}

// publish makes ins the client's instances of app; removed is the one
// withdrawn, if any. Called with d.mu held. As Registry.publish: a
// withdrawn instance is deregistered explicitly (PolarisMesh keeps those
// missing from a new batch) and the rest published again as one batch,
// which also resets the SDK's redo record for a reconnect.
func (d *Discovery) publish(app string, ins map[string]extension.ServiceInstance, removed *extension.ServiceInstance) error {
	if removed != nil {
		ok, err := d.client.DeregisterInstance(vo.DeregisterInstanceParam{
			Ip: removed.Host, Port: uint64(removed.Port), ServiceName: app, GroupName: d.group, Ephemeral: true,
		})
		if err := result(ok, err); err != nil || len(ins) == 0 {
			return err
		}
	}
	ids := make([]string, 0, len(ins))
	for id := range ins {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	if len(ids) == 1 {
		// One instance (an App's usual case) is registered on its own:
		// PolarisMesh drops a batch that re-registers an instance a few
		// milliseconds after the last batch did (the new metadata, i.e.
		// the revision of an App's second service, is lost; seen with a
		// 5 ms gap, not with 300 ms), and keeps a single registration.
		ok, err := d.client.RegisterInstance(d.nacosInstance(ins[ids[0]]))
		return result(ok, err)
	}
	batch := vo.BatchRegisterInstanceParam{ServiceName: app, GroupName: d.group}
	for _, id := range ids {
		batch.Instances = append(batch.Instances, d.nacosInstance(ins[id]))
	}
	ok, err := d.client.BatchRegisterInstance(batch)
	return result(ok, err)
}

// nacosInstance is the Nacos instance of in, as Java's
// NacosNamingServiceUtils.toInstance and dubbo-go's toRegisterInstance
// build it.
func (d *Discovery) nacosInstance(in extension.ServiceInstance) vo.RegisterInstanceParam {
	md := make(map[string]string, len(in.Metadata)+1)
	for k, v := range in.Metadata {
		md[k] = v
	}
	md[metaID] = in.ID()
	// Nacos ignores instances of weight 0, and caps weights at 10000.
	weight := 1.0
	if w, err := strconv.ParseFloat(in.Metadata[metaWeight], 64); err == nil && w > 0 {
		weight = math.Min(w, 10000)
	}
	return vo.RegisterInstanceParam{
		Ip: in.Host, Port: uint64(in.Port), Weight: weight,
		Enable: true, Healthy: true, Ephemeral: true,
		Metadata: md, ServiceName: in.App, GroupName: d.group,
	}
}

// serviceInstances reads Nacos instances of app back: the healthy and
// enabled ones, their metadata without the keys the server adds
// (internal-nacos-*) and dubbo-go's id; sorted by id. The SDK shares the
// instances' metadata maps with its cache, so they are copied, never
// changed.
func serviceInstances(app string, ins []model.Instance) []extension.ServiceInstance {
	out := make([]extension.ServiceInstance, 0, min(len(ins), maxInstances))
	for _, in := range ins {
		if len(out) == maxInstances {
			break
		}
		if !in.Healthy || !in.Enable || in.Ip == "" || in.Port == 0 || in.Port > 65535 || len(in.Metadata) > maxMetaEntries {
			continue
		}
		md := make(map[string]string, len(in.Metadata))
		for k, v := range in.Metadata {
			if k != metaID && !strings.HasPrefix(k, internalPrefix) {
				md[k] = v
			}
		}
		out = append(out, extension.ServiceInstance{App: app, Host: in.Ip, Port: int(in.Port), Metadata: md})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID() < out[j].ID() })
	return out
}

// Subscribe calls l with app's instances now and after every change. l
// must be comparable: Unsubscribe finds it by ==.
func (d *Discovery) Subscribe(ctx context.Context, app string, l extension.InstanceListener) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if l == nil {
		return errors.New("nacos: subscribe: nil listener")
	}
	return d.subscribe(app, l)
}

// Unsubscribe stops l's notifications for app; the SDK subscription ends
// with the application's last listener.
func (d *Discovery) Unsubscribe(ctx context.Context, app string, l extension.InstanceListener) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return d.unsubscribe(app, l)
}

// Mapping reads the applications mapped to iface (none: the data id is
// absent or empty).
func (d *Discovery) Mapping(ctx context.Context, iface string) ([]string, error) {
	content, err := d.cfg.GetConfig(ctx, iface, MappingGroup)
	if err != nil {
		return nil, fmt.Errorf("nacos: read the mapping of %s: %w", iface, err)
	}
	return parseMapping(content), nil
}

// parseMapping splits a mapping document, bounded: at most maxMappingApps
// names of at most maxAppName bytes, from its first maxMappingBytes.
func parseMapping(content string) []string {
	if len(content) > maxMappingBytes {
		content = content[:maxMappingBytes]
	}
	var apps []string
	seen := map[string]bool{}
	for _, a := range strings.Split(content, ",") {
		a = strings.TrimSpace(a)
		if a == "" || len(a) > maxAppName || seen[a] {
			continue
		}
		seen[a] = true
		apps = append(apps, a)
		if len(apps) == maxMappingApps {
			break
		}
	}
	return apps
}

func md5Hex(s string) string {
	h := md5.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}

// AddMapping adds app to the mapping of iface, keeping the applications
// already there, as Java's NacosMetadataReport does: read the document,
// append app if absent, and publish it with the MD5 of what was read
// (Nacos' compare-and-set), so that of two writers at once one fails and
// tries again on the other's document. Bounded to mappingAttempts rounds.
//
// PolarisMesh (the Nacos-protocol server of the tests, v1.18) drops the
// casMd5 of a publish: it creates an absent data id, but refuses every
// compare-and-set of an existing one as a conflict. When a conflict comes
// back twice although the document still reads as what the publish was
// compared with, the server is taken to lack compare-and-set: AddMapping
// then publishes unconditionally, waits mappingSettle and reads the
// document again, writing again if another writer's change replaced its
// own (what dubbo-go does, plus the check). Every read of that mode waits
// mappingSettle first, so that it is not a stale one.
func (d *Discovery) AddMapping(ctx context.Context, iface, app string) error {
	if app == "" || strings.Contains(app, ",") || len(app) > maxAppName {
		return fmt.Errorf("nacos: map %s to %q: an application name must be non-empty, at most %d bytes and without commas", iface, app, maxAppName)
	}
	var lastErr error
	stale := 0 // conflicts while the document read the same
	for attempt := 0; attempt < mappingAttempts; attempt++ {
		if attempt > 0 {
			// Without compare-and-set, read only once the server has
			// settled: a write made on a stale read would replace another
			// writer's (and this one's last write is checked so).
			wait := mappingBackoff * time.Duration(attempt)
			if d.noCAS.Load() {
				wait = mappingSettle
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("nacos: map %s to %s: %w (last: %v)", iface, app, ctx.Err(), lastErr)
			case <-time.After(wait):
			}
		}
		cur, err := d.cfg.GetConfig(ctx, iface, MappingGroup)
		if err != nil {
			return fmt.Errorf("nacos: map %s to %s: read the mapping: %w", iface, app, err)
		}
		apps := parseMapping(cur)
		for _, a := range apps {
			if a == app {
				return nil
			}
		}
		next := strings.Join(append(apps, app), ",")
		param := vo.ConfigParam{DataId: iface, Group: MappingGroup, Content: next}
		if !d.noCAS.Load() {
			param.CasMd5 = md5Hex(cur)
		}
		ok, err := d.cfg.client.PublishConfig(param)
		if err = result(ok, err); err == nil {
			if param.CasMd5 != "" {
				return nil
			}
			// Unconditional: the next round reads the document again,
			// once the server has settled, to check that no other writer's
			// document replaced this one.
			continue
		}
		lastErr = err
		if param.CasMd5 == "" {
			continue
		}
		// A conflict: another writer got in first, or the server does not
		// compare (see above).
		if again, rerr := d.cfg.GetConfig(ctx, iface, MappingGroup); rerr == nil && again == cur {
			if stale++; stale >= 2 {
				d.noCAS.Store(true)
				d.log.Warn("the server refuses compare-and-set publishes of an unchanged config (PolarisMesh drops casMd5); the mapping is written unconditionally and checked after",
					"data_id", iface, "group", MappingGroup, "err", err)
			}
		}
	}
	return fmt.Errorf("nacos: map %s to %s: the mapping (data id %s, group %s) did not take the application after %d attempts (writers racing, or the server refusing): %v",
		iface, app, iface, MappingGroup, mappingAttempts, lastErr)
}

// Close withdraws this client's instances, ends its subscriptions and
// closes both clients. Close is idempotent.
func (d *Discovery) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	errs := d.unsubscribeAll()
	for app, ins := range d.registered {
		for _, in := range ins {
			if _, err := d.client.DeregisterInstance(vo.DeregisterInstanceParam{
				Ip: in.Host, Port: uint64(in.Port), ServiceName: app, GroupName: d.group, Ephemeral: true,
			}); err != nil {
				errs = append(errs, fmt.Errorf("deregister %s of %s: %w", in.ID(), app, err))
			}
		}
	}
	d.registered = nil
	d.mu.Unlock()
	d.client.CloseClient()
	if err := d.cfg.Close(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("nacos: close service discovery: %w", errors.Join(errs...))
	}
	return nil
}
