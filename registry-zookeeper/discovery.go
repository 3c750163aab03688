package zookeeper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/registry"
)

// Application-level service discovery (Dubbo 3) on ZooKeeper, in the
// layout Java's ZookeeperServiceDiscovery (Curator's service discovery)
// and dubbo-go's registry/zookeeper write and read:
//
//	/services/<application>/<host>:<port>    ephemeral, data = Curator's ServiceInstance JSON
//	/<group>/mapping/<interface>             persistent, data = "app1,app2"
//
// /services is Java's default root (its rootPath parameter changes it); the
// mapping lives where Dubbo's ZooKeeper metadata report keeps it, under the
// registry's group (default dubbo), as dubbo-go's report does when the
// registry doubles as metadata report (its default).
const (
	// DefaultServicesRoot is Java's CuratorFrameworkParams.ROOT_PATH default.
	DefaultServicesRoot = "/services"
	paramRootPath       = "rootPath"

	// curatorPayloadClass is the payload's Jackson type id: Java's Curator
	// deserialises the payload into this class.
	curatorPayloadClass = "org.apache.dubbo.registry.zookeeper.ZookeeperInstance"
	curatorDynamic      = "DYNAMIC"
)

// Bounds on what the discovery reads from ZooKeeper: an instance's data is
// a few hundred bytes of metadata; a mapping a handful of names.
const (
	maxInstanceData  = 256 << 10
	maxInstances     = 10000
	maxMetadataPairs = 1024
	maxMappingData   = 64 << 10
	maxMappedApps    = 1024
	// mappingAttempts bounds AddMapping's compare-and-set retries: each
	// conflict is another writer's success, so this many in a row means
	// a storm, not a bug to spin on.
	mappingAttempts = 16
)

// DiscoveryFactory opens ZooKeeper application-level discoveries
// (extension.ServiceDiscoveryFactory, name "zookeeper") from the registry's
// address URL. Log receives their messages (nil: slog.Default()).
type DiscoveryFactory struct{ Log *slog.Logger }

var _ extension.ServiceDiscoveryFactory = DiscoveryFactory{}

// GetServiceDiscovery opens a session of its own with the servers of url
// (the same parameters as the registry's: timeout, session, backup,
// user:password) and waits for it at most url's timeout.
func (f DiscoveryFactory) GetServiceDiscovery(url *kernel.URL) (extension.ServiceDiscovery, error) {
	log := f.Log
	if log == nil {
		log = slog.Default()
	}
	log = log.With("discovery", Name)
	root, err := servicesRoot(url)
	if err != nil {
		return nil, err
	}
	c, err := dial(url, log, "service discovery")
	if err != nil {
		return nil, err
	}
	d := &Discovery{
		owner:       newOwner[extension.InstanceListener, *appWatch](c, log, errDiscoveryClosed),
		root:        root,
		mappingRoot: rootPath(url) + "/" + registry.MappingGroup,
	}
	d.nodes = newEphemerals(c, "instances", d.write)
	// The watches re-arm by themselves: their channels report the expiry.
	d.wg.Go(func() { d.nodes.keep(d.stop) })
	return d, nil
}

// servicesRoot is the root of the instances: the URL's rootPath (Java's
// parameter), else /services.
func servicesRoot(u *kernel.URL) (string, error) {
	r := u.ParamOr(paramRootPath, DefaultServicesRoot)
	r = "/" + strings.Trim(r, "/")
	if r == "/" || strings.Contains(r, "//") || strings.ContainsRune(r, 0) {
		return "", fmt.Errorf("zookeeper: rootPath %q is not a node path (want e.g. /services)", clip(u.Param(paramRootPath)))
	}
	return r, nil
}

// Discovery is a ZooKeeper session holding this process's instances and
// watching other applications'. It is safe for concurrent use.
type Discovery struct {
	// owner's watches are the applications' instances, by application.
	owner[extension.InstanceListener, *appWatch]
	root        string // /services
	mappingRoot string // /dubbo/mapping
	// nodes are the instances' data, written again on a new session.
	nodes *ephemerals[[]byte]
}

var _ extension.ServiceDiscovery = (*Discovery)(nil)

var errDiscoveryClosed = errors.New("zookeeper: service discovery closed")

// Root is the root of the instances (/services unless rootPath says
// otherwise); MappingRoot that of the interface → application mapping.
func (d *Discovery) Root() string        { return d.root }
func (d *Discovery) MappingRoot() string { return d.mappingRoot }

// curatorInstance is Curator's ServiceInstance as its JsonInstanceSerializer
// writes it (compatible mode: no "enabled"), every field present, as Java
// writes them; Java's Jackson and dubbo-go's encoding/json read it back.
type curatorInstance struct {
	Name                string          `json:"name"`
	ID                  string          `json:"id"`
	Address             string          `json:"address"`
	Port                int             `json:"port"`
	SSLPort             *int            `json:"sslPort"`
	Payload             curatorPayload  `json:"payload"`
	RegistrationTimeUTC int64           `json:"registrationTimeUTC"`
	ServiceType         string          `json:"serviceType"`
	URISpec             json.RawMessage `json:"uriSpec"`
}

// curatorPayload is Dubbo's ZookeeperInstance; the metadata map is sorted
// by key, as Java's getSortedMetadata (encoding/json sorts map keys).
type curatorPayload struct {
	Class    string            `json:"@class"`
	ID       string            `json:"id"`
	Name     string            `json:"name"`
	Metadata map[string]string `json:"metadata"`
}

// instanceID is Dubbo's node name of an instance, host:port without the
// brackets of an IPv6 host (CuratorFrameworkUtils.generateId).
func instanceID(host string, port int) string { return host + ":" + strconv.Itoa(port) }

// nodeName checks that s can be one segment of a znode path.
func nodeName(what, s string) error {
	if s == "" || s == "." || s == ".." || strings.ContainsAny(s, "/\x00") || len(s) > maxNodeName {
		return fmt.Errorf("%s %q is not a ZooKeeper node name (non-empty, no / or NUL, not . or ..)", what, clip(s))
	}
	return nil
}

// InstancePath is the node of an instance: <root>/<app>/<host>:<port>.
func (d *Discovery) InstancePath(in extension.ServiceInstance) (string, error) {
	if err := nodeName("application", in.App); err != nil {
		return "", err
	}
	if err := nodeName("host", in.Host); err != nil {
		return "", err
	}
	if in.Port <= 0 || in.Port > 65535 {
		return "", fmt.Errorf("instance of %s at %s: port %d is out of range", in.App, in.Host, in.Port)
	}
	return d.root + "/" + in.App + "/" + instanceID(in.Host, in.Port), nil
}

// EncodeInstance is the data of an instance's node. registered is the
// registration time (ms since the epoch, UTC).
func EncodeInstance(in extension.ServiceInstance, registered int64) ([]byte, error) {
	meta := in.Metadata
	if meta == nil {
		meta = map[string]string{}
	}
	id := instanceID(in.Host, in.Port)
	b, err := json.Marshal(curatorInstance{
		Name: in.App, ID: id, Address: in.Host, Port: in.Port,
		Payload:             curatorPayload{Class: curatorPayloadClass, ID: id, Name: in.App, Metadata: meta},
		RegistrationTimeUTC: registered, ServiceType: curatorDynamic, URISpec: json.RawMessage("null"),
	})
	if err != nil {
		return nil, err
	}
	if len(b) > maxInstanceData {
		return nil, fmt.Errorf("instance %s of %s: %d bytes of data is over the %d-byte limit weft reads back", id, in.App, len(b), maxInstanceData)
	}
	return b, nil
}

// DecodeInstance reads the data of an instance node of app, as Java's
// and dubbo-go's write it. The data is untrusted: oversized data, a
// missing address or port, or too much metadata is an error. Metadata
// values that are not strings (a writer that is neither Java nor
// dubbo-go) are kept in their JSON form.
func DecodeInstance(app string, data []byte) (extension.ServiceInstance, error) {
	if len(data) > maxInstanceData {
		return extension.ServiceInstance{}, fmt.Errorf("%d bytes of data is over the %d-byte limit", len(data), maxInstanceData)
	}
	var ci struct {
		Name    string `json:"name"`
		Address string `json:"address"`
		Port    *int   `json:"port"`
		Payload *struct {
			Metadata map[string]json.RawMessage `json:"metadata"`
		} `json:"payload"`
	}
	if err := json.Unmarshal(data, &ci); err != nil {
		return extension.ServiceInstance{}, fmt.Errorf("not Curator's ServiceInstance JSON: %v", err)
	}
	switch {
	case ci.Address == "":
		return extension.ServiceInstance{}, errors.New("no address")
	case ci.Port == nil || *ci.Port <= 0 || *ci.Port > 65535:
		return extension.ServiceInstance{}, errors.New("no port, or one out of range")
	case ci.Name != "" && ci.Name != app:
		return extension.ServiceInstance{}, fmt.Errorf("it names application %q, not %q (its parent node)", clip(ci.Name), clip(app))
	}
	in := extension.ServiceInstance{App: app, Host: ci.Address, Port: *ci.Port, Metadata: map[string]string{}}
	if ci.Payload == nil {
		return in, nil
	}
	if len(ci.Payload.Metadata) > maxMetadataPairs {
		return extension.ServiceInstance{}, fmt.Errorf("%d metadata entries, over the limit of %d", len(ci.Payload.Metadata), maxMetadataPairs)
	}
	for k, raw := range ci.Payload.Metadata {
		var s string
		if err := json.Unmarshal(raw, &s); err == nil {
			in.Metadata[k] = s
		} else if string(raw) != "null" {
			in.Metadata[k] = string(raw)
		}
	}
	return in, nil
}

// Register creates the instance's ephemeral node, or replaces its data
// (a new revision) when this session holds it already. A node of the same
// instance left by another session (an expired one, or an earlier run)
// is replaced, as Java's and dubbo-go's registerService delete it first.
func (d *Discovery) Register(ctx context.Context, in extension.ServiceInstance) error {
	path, err := d.nodePath(ctx, "register", in)
	if err != nil {
		return err
	}
	data, err := EncodeInstance(in, time.Now().UnixMilli())
	if err != nil {
		return fmt.Errorf("zookeeper: register instance at %s: %w", path, err)
	}
	if err := d.nodes.put(path, data); err != nil {
		return fmt.Errorf("zookeeper: register instance %s at %s: %w", path, d.c.where, err)
	}
	d.log.Debug("instance registered", "node", path, "revision", in.Metadata[registry.MetaRevision])
	return nil
}

// Unregister deletes the instance's node.
func (d *Discovery) Unregister(ctx context.Context, in extension.ServiceInstance) error {
	path, err := d.nodePath(ctx, "unregister", in)
	if err != nil {
		return err
	}
	if err := d.nodes.remove(path); err != nil {
		return fmt.Errorf("zookeeper: unregister instance: %w", err)
	}
	d.log.Debug("instance unregistered", "node", path)
	return nil
}

// nodePath is in's node, if ctx is live and the discovery open; verb
// names the operation in the error.
func (d *Discovery) nodePath(ctx context.Context, verb string, in extension.ServiceInstance) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	path, err := d.InstancePath(in)
	if err != nil {
		return "", fmt.Errorf("zookeeper: %s instance: %w", verb, err)
	}
	return path, d.check()
}

// write puts data in the ephemeral node path: created (with its parents)
// if absent, set if this session owns it, replaced if another does.
func (d *Discovery) write(path string, data []byte) error {
	conn := d.c.conn
	for attempt := 0; attempt < 4; attempt++ {
		_, err := conn.Create(path, data, zk.FlagEphemeral, d.c.acl)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, zk.ErrNoNode):
			if err := d.c.createParents(path); err != nil {
				return err
			}
		case errors.Is(err, zk.ErrNodeExists):
			_, st, err := conn.Exists(path)
			if err != nil {
				return fmt.Errorf("stat %s: %w", path, err)
			}
			if st == nil {
				continue // deleted meanwhile: create it
			}
			if st.EphemeralOwner == conn.SessionID() {
				// Ours: only this session writes it, so no version check.
				_, err := conn.Set(path, data, -1)
				if err == nil {
					return nil
				}
				if errors.Is(err, zk.ErrNoNode) {
					continue
				}
				return fmt.Errorf("set %s: %w", path, err)
			}
			if err := conn.Delete(path, st.Version); err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrBadVersion) {
				return fmt.Errorf("replace %s (left by session %#x): %w", path, st.EphemeralOwner, err)
			}
		default:
			return fmt.Errorf("create %s: %w", path, err)
		}
	}
	return fmt.Errorf("write %s: the node kept changing under 4 attempts (another process registers the same host:port?)", path)
}

// appWatch is the one watch of an application's instances, shared by its
// listeners: a child watch on <root>/<app> and a data watch on each
// instance (a new revision changes the data, not the children).
type appWatch struct {
	shared[extension.InstanceListener, []extension.ServiceInstance]
	d    *Discovery
	app  string
	path string
	// events carries the watch channels' firings to the watch's goroutine:
	// "" for the children, else the instance's node name.
	events chan watchEvent

	// Owned by whoever runs sync (Subscribe first, then the goroutine).
	childArmed bool
	nodes      map[string]*watchedNode
	rejected   map[string]bool // node names already logged as malformed
}

type watchedNode struct {
	in    *extension.ServiceInstance // nil: unreadable, left out
	armed bool
}

type watchEvent struct {
	id string
	ev zk.Event
}

// Subscribe calls l with app's instances now (before it returns) and
// after every change. l must be comparable: Unsubscribe finds it by ==.
func (d *Discovery) Subscribe(ctx context.Context, app string, l extension.InstanceListener) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if l == nil {
		return errors.New("zookeeper: subscribe: nil instance listener")
	}
	if err := nodeName("application", app); err != nil {
		return fmt.Errorf("zookeeper: subscribe: %w", err)
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return errDiscoveryClosed
	}
	if w := d.watches[app]; w != nil {
		d.mu.Unlock()
		w.listeners.Add(l, w.notify)
		return nil
	}
	w := &appWatch{shared: newShared[extension.InstanceListener, []extension.ServiceInstance](),
		d: d, app: app, path: d.root + "/" + app, events: make(chan watchEvent, 64), nodes: map[string]*watchedNode{}, rejected: map[string]bool{}}
	w.listeners.Add(l, w.notify)
	d.watches[app] = w
	d.mu.Unlock()
	up := d.c.reconnected() // see run
	if err := w.sync(); err != nil {
		d.mu.Lock()
		if d.watches[app] == w {
			delete(d.watches, app)
		}
		d.mu.Unlock()
		close(w.stop)
		return fmt.Errorf("zookeeper: subscribe to application %s: %w", app, err)
	}
	w.deliver()
	d.wg.Add(1)
	go w.run(up)
	return nil
}

// forward hands one firing of a watch channel to the watch's goroutine.
func (w *appWatch) forward(id string, ch <-chan zk.Event) {
	w.d.wg.Add(1)
	go func() {
		defer w.d.wg.Done()
		select {
		case ev := <-ch:
			select {
			case w.events <- watchEvent{id, ev}:
			case <-w.stop:
			case <-w.d.stop:
			}
		case <-w.stop:
		case <-w.d.stop:
		}
	}()
}

// sync re-arms what is not armed: the children (listing them again, and
// forgetting the instances gone) and each instance's data. It is
// idempotent; on error the caller calls it again later.
func (w *appWatch) sync() error {
	conn := w.d.c.conn
	if !w.childArmed {
		var children []string
		var ch <-chan zk.Event
		for attempt := 0; ; attempt++ {
			var err error
			children, _, ch, err = conn.ChildrenW(w.path)
			if errors.Is(err, zk.ErrNoNode) && attempt < 3 {
				// No instance ever registered: create the node so that
				// the watch sees the first one (dubbo-go creates it too).
				if err := w.d.c.create(w.path, nil, false); err != nil {
					return err
				}
				continue
			}
			if err != nil {
				return fmt.Errorf("list %s: %w", w.path, err)
			}
			break
		}
		w.childArmed = true
		w.forward("", ch)
		sort.Strings(children)
		if len(children) > maxInstances {
			w.d.log.Warn("application has more instances than weft reads; the rest are left out", "node", w.path, "instances", len(children), "limit", maxInstances)
			children = children[:maxInstances]
		}
		present := make(map[string]bool, len(children))
		for _, id := range children {
			present[id] = true
			if w.nodes[id] == nil {
				w.nodes[id] = &watchedNode{}
			}
		}
		for id := range w.nodes {
			if !present[id] {
				delete(w.nodes, id)
			}
		}
	}
	var errs []error
	for id, n := range w.nodes {
		if n.armed {
			continue
		}
		p := w.path + "/" + id
		data, _, ch, err := conn.GetW(p)
		if errors.Is(err, zk.ErrNoNode) {
			delete(w.nodes, id) // the child watch reports it too
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("read %s: %w", p, err))
			continue
		}
		n.armed = true
		w.forward(id, ch)
		in, err := DecodeInstance(w.app, data)
		if err != nil {
			n.in = nil
			if key := clip(id); !w.rejected[key] {
				if len(w.rejected) < 1000 {
					w.rejected[key] = true
				}
				w.d.log.Warn("instance node ignored: not a Dubbo instance", "node", clip(p), "err", err)
			}
			continue
		}
		n.in = &in
	}
	return errors.Join(errs...)
}

// run follows the watch channels' firings until the watch stops. After
// every reconnect (see client.reconnected) it arms every watch afresh and
// reads the instances again, whatever the server lost meanwhile.
func (w *appWatch) run(up <-chan struct{}) {
	defer w.d.wg.Done()
	var wait time.Duration
	var retry <-chan time.Time
	for {
		select {
		case <-w.stop:
			return
		case <-w.d.stop:
			return
		case <-up:
			w.d.log.Debug("zookeeper connection back: reading the instances and arming their watches again", "node", w.path)
			w.childArmed = false
			for _, n := range w.nodes {
				n.armed = false
			}
		case <-retry:
		case e := <-w.events:
			if e.ev.Type == zk.EventNotWatching && errors.Is(e.ev.Err, zk.ErrClosing) {
				return
			}
			w.fired(e)
		}
		// Take every firing already queued before reading: a burst of
		// changes is one delivery.
		for drained := false; !drained; {
			select {
			case e := <-w.events:
				w.fired(e)
			default:
				drained = true
			}
		}
		retry = nil
		up = w.d.c.reconnected() // before sync: a reconnect during it arms again
		if err := w.sync(); err != nil {
			if errors.Is(err, zk.ErrClosing) {
				return
			}
			wait = backoff(wait)
			w.d.log.Debug("instance watch: read failed; retrying", "node", w.path, "err", err, "in", wait)
			retry = time.After(wait)
		} else {
			wait = 0
		}
		w.deliver()
	}
}

func (w *appWatch) fired(e watchEvent) {
	if e.ev.Type == zk.EventNotWatching {
		w.d.log.Info("instance watch lost with the session; watching again", "node", w.path+"/"+e.id, "err", e.ev.Err)
	}
	if e.id == "" {
		w.childArmed = false
	} else if n := w.nodes[e.id]; n != nil {
		n.armed = false
	}
}

// deliver tells the listeners the instances now, if they differ from what
// they were told last.
func (w *appWatch) deliver() {
	ins := make([]extension.ServiceInstance, 0, len(w.nodes))
	for _, n := range w.nodes {
		if n.in != nil {
			ins = append(ins, *n.in)
		}
	}
	sort.Slice(ins, func(i, j int) bool { return ins[i].ID() < ins[j].ID() })
	w.listeners.Deliver(ins, func(last []extension.ServiceInstance, had bool) bool {
		return !had || !reflect.DeepEqual(ins, last)
	}, w.notify)
}

// notify gives l a copy of the list: a listener may keep it.
func (w *appWatch) notify(l extension.InstanceListener, ins []extension.ServiceInstance) {
	l.NotifyInstances(w.app, slices.Clone(ins))
}

// Unsubscribe stops l's notifications for app; the watch ends with its
// last listener.
func (d *Discovery) Unsubscribe(ctx context.Context, app string, l extension.InstanceListener) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return d.unwatch(app, l)
}

// MappingPath is the node of an interface's mapping.
func (d *Discovery) MappingPath(iface string) (string, error) {
	if err := nodeName("interface", iface); err != nil {
		return "", err
	}
	return d.mappingRoot + "/" + iface, nil
}

// parseMapping reads a mapping node's data: applications, comma-separated
// (Java's and dubbo-go's form), blanks and repeats dropped.
func parseMapping(path string, data []byte) ([]string, error) {
	if len(data) > maxMappingData {
		return nil, fmt.Errorf("%s holds %d bytes, over the %d-byte limit of a mapping", path, len(data), maxMappingData)
	}
	var apps []string
	seen := map[string]bool{}
	for _, a := range strings.Split(string(data), ",") {
		if a = strings.TrimSpace(a); a == "" || seen[a] {
			continue
		}
		if len(apps) == maxMappedApps {
			return nil, fmt.Errorf("%s maps more than %d applications", path, maxMappedApps)
		}
		seen[a] = true
		apps = append(apps, a)
	}
	return apps, nil
}

// Mapping returns the applications mapped to iface (none: empty, no
// error), in the node's order.
func (d *Discovery) Mapping(ctx context.Context, iface string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	path, err := d.MappingPath(iface)
	if err != nil {
		return nil, fmt.Errorf("zookeeper: mapping: %w", err)
	}
	data, _, err := d.c.conn.Get(path)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("zookeeper: read mapping %s at %s: %w", path, d.c.where, err)
	}
	apps, err := parseMapping(path, data)
	if err != nil {
		return nil, fmt.Errorf("zookeeper: mapping: %w", err)
	}
	return apps, nil
}

// AddMapping adds app to iface's mapping with a compare-and-set on the
// node's version (Java's ZookeeperMetadataReport does the same), so two
// applications mapping one interface at once both end up in it: a writer
// that lost the race reads again and retries, at most mappingAttempts
// times.
func (d *Discovery) AddMapping(ctx context.Context, iface, app string) error {
	path, err := d.MappingPath(iface)
	if err != nil {
		return fmt.Errorf("zookeeper: map to %s: %w", app, err)
	}
	if app == "" || strings.ContainsAny(app, ",/") {
		return fmt.Errorf("zookeeper: map %s: application %q cannot be in a mapping (non-empty, no , or /)", iface, clip(app))
	}
	conn := d.c.conn
	for attempt := 0; attempt < mappingAttempts; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if attempt > 0 {
			// A little jitter, so that two losers do not collide again.
			time.Sleep(time.Duration(rand.IntN(20*attempt)+1) * time.Millisecond)
		}
		data, st, err := conn.Get(path)
		if errors.Is(err, zk.ErrNoNode) {
			if err := d.c.createParents(path); err != nil {
				return fmt.Errorf("zookeeper: map %s to %s at %s: %w", iface, app, d.c.where, err)
			}
			_, err := conn.Create(path, []byte(app), 0, d.c.acl)
			if err == nil {
				return nil
			}
			if errors.Is(err, zk.ErrNodeExists) {
				continue // another writer created it: add to theirs
			}
			return fmt.Errorf("zookeeper: map %s to %s: create %s at %s: %w", iface, app, path, d.c.where, err)
		}
		if err != nil {
			return fmt.Errorf("zookeeper: map %s to %s: read %s at %s: %w", iface, app, path, d.c.where, err)
		}
		apps, err := parseMapping(path, data)
		if err != nil {
			return fmt.Errorf("zookeeper: map %s to %s: %w", iface, app, err)
		}
		if slices.Contains(apps, app) {
			return nil
		}
		if len(apps) >= maxMappedApps {
			return fmt.Errorf("zookeeper: map %s to %s: %s maps %d applications already, the limit", iface, app, path, len(apps))
		}
		next := strings.Join(append(apps, app), ",")
		_, err = conn.Set(path, []byte(next), st.Version)
		if err == nil {
			return nil
		}
		if !errors.Is(err, zk.ErrBadVersion) && !errors.Is(err, zk.ErrNoNode) {
			return fmt.Errorf("zookeeper: map %s to %s: set %s at %s: %w", iface, app, path, d.c.where, err)
		}
	}
	return fmt.Errorf("zookeeper: map %s to %s: %s changed under each of %d attempts; other writers keep racing: try again", iface, app, path, mappingAttempts)
}

// Close ends every watch and the session: the server deletes the
// instances' ephemeral nodes at once. Close is idempotent.
func (d *Discovery) Close() error {
	d.shut()
	return nil
}
