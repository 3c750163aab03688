// Package zookeeper is weft's registry and config center on Apache
// ZooKeeper, through go-zookeeper/zk, in Apache Dubbo's layout, so that Java
// Dubbo, dubbo-go and weft read each other's registrations. It implements
// extension.Registry under the name "zookeeper", opened from an address URL
// such as
//
//	zookeeper://127.0.0.1:2181?backup=127.0.0.1:2182,127.0.0.1:2183&timeout=5000&session=60000
//
// (Dubbo's parameters: backup lists more servers, timeout bounds the first
// connection in ms (default 5000), session is the session timeout in ms
// (default 60000), group changes the root from /dubbo, user:password@
// authenticates with ZooKeeper's digest scheme.)
//
// A provider URL is the ephemeral node
//
//	/dubbo/<interface>/providers/<URL.encode(full URL string)>
//
// (consumers under consumers/), every segment escaped as Java's URLEncoder
// does (see Encode); the parent nodes are persistent. A subscriber watches
// the providers node's children and gets the full list, filtered by group
// and version as Dubbo's UrlUtils.isMatch does, at subscribe time and after
// every change.
//
// go-zookeeper reconnects and re-sets watches by itself within a session.
// When the session expires, the server has deleted the ephemeral nodes and
// forgotten the watches: the registry creates every registration again and
// every watch re-arms and delivers the list it reads, on the new session.
//
// DiscoveryFactory (same name) is application-level service discovery in
// Dubbo's Curator layout: instances as ephemeral nodes
// /services/<app>/<host:port> holding Curator's ServiceInstance JSON, and
// the interface → application mapping as /<group>/mapping/<interface>
// (see discovery.go).
//
// The package is also weft's ZooKeeper config center (ConfigFactory,
// ConfigCenter, under the same name), in Dubbo's ZookeeperDynamicConfiguration
// layout: a document is the data of /dubbo/config/<group>/<key>.
//
// weft does not build ZooKeeper in: an App gets both from Plugin,
//
//	app, err := weft.New(weft.WithPlugins(zookeeper.Plugin()), ...)
package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// Name is the extension name and address-URL protocol.
const Name = "zookeeper"

// Factory opens ZooKeeper registries. Log receives the registry's messages
// (nil: slog.Default()).
type Factory struct{ Log *slog.Logger }

var _ extension.RegistryFactory = Factory{}

// GetRegistry opens a session with the ZooKeeper servers of url and waits
// for it at most url's timeout parameter (ms, default 5000).
func (f Factory) GetRegistry(url *kernel.URL) (extension.Registry, error) {
	log := f.Log
	if log == nil {
		log = slog.Default()
	}
	log = log.With("registry", Name)
	c, err := dial(url, log, "registry")
	if err != nil {
		return nil, err
	}
	r := &Registry{
		owner: newOwner[extension.NotifyListener, *subscription](c, log, errClosed),
		root:  rootPath(url),
		nodes: newEphemerals(c, "URLs", func(path string, u *kernel.URL) error {
			// Ephemeral unless the URL says dynamic=false, as in Dubbo.
			return c.create(path, nil, u.ParamBool(paramDynamic, true))
		}),
	}
	r.wg.Go(func() { r.nodes.keep(r.stop) })
	return r, nil
}

// Registry is a ZooKeeper registry session. It is safe for concurrent use.
type Registry struct {
	// owner's watches are the subscriptions, by service key.
	owner[extension.NotifyListener, *subscription]
	root string
	// nodes are the registrations, written again on a new session.
	nodes *ephemerals[*kernel.URL]
}

var _ extension.Registry = (*Registry)(nil)

var errClosed = errors.New("zookeeper: registry closed")

// Root is the registry's root node (/dubbo unless the URL's group says
// otherwise).
func (r *Registry) Root() string { return r.root }

// Register creates url's ephemeral node (persistent if url has
// dynamic=false, as in Dubbo).
func (r *Registry) Register(ctx context.Context, url *kernel.URL) error {
	path, err := r.nodePath(ctx, "register", url)
	if err != nil {
		return err
	}
	if err := r.nodes.put(path, url); err != nil {
		return fmt.Errorf("zookeeper: register %s at %s: %w", url, r.c.where, err)
	}
	r.log.Debug("registered", "node", path)
	return nil
}

// Unregister deletes url's node.
func (r *Registry) Unregister(ctx context.Context, url *kernel.URL) error {
	path, err := r.nodePath(ctx, "unregister", url)
	if err != nil {
		return err
	}
	if err := r.nodes.remove(path); err != nil {
		return fmt.Errorf("zookeeper: unregister %s: %w", url, err)
	}
	r.log.Debug("unregistered", "node", path)
	return nil
}

// nodePath is url's node, if ctx is live and the registry open; verb
// names the operation in the error.
func (r *Registry) nodePath(ctx context.Context, verb string, url *kernel.URL) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	path, err := NodePath(r.root, url)
	if err != nil {
		return "", fmt.Errorf("zookeeper: %s %s: %w", verb, url, err)
	}
	return path, r.check()
}

// subscription is one watch of a service's providers node, shared by the
// listeners of one service key.
type subscription struct {
	shared[extension.NotifyListener, []*kernel.URL]
	url  *kernel.URL
	path string
	// rejected remembers the malformed names already logged, so a bad
	// node is reported once, not at every change of its siblings.
	rejectedMu sync.Mutex
	rejected   map[string]bool
}

func notify(l extension.NotifyListener, urls []*kernel.URL) { l.Notify(urls) }

// Subscribe calls listener with the full provider list of url's service
// (interface, group, version) now and after every change. listener must be
// comparable: Unsubscribe finds it by ==.
func (r *Registry) Subscribe(ctx context.Context, url *kernel.URL, listener extension.NotifyListener) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if listener == nil {
		return errors.New("zookeeper: subscribe: nil listener")
	}
	iface := url.Interface()
	if iface == "" || iface == anyValue {
		return fmt.Errorf("zookeeper: subscribe %s: the URL names no interface (subscribing to every service is not supported)", url)
	}
	key := url.ServiceKey()
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return errClosed
	}
	if s := r.watches[key]; s != nil {
		r.mu.Unlock()
		s.listeners.Add(listener, notify)
		return nil
	}
	s := &subscription{shared: newShared[extension.NotifyListener, []*kernel.URL](),
		url: url, path: categoryPath(r.root, iface, CategoryProviders), rejected: map[string]bool{}}
	s.listeners.Add(listener, notify)
	r.watches[key] = s
	r.mu.Unlock()

	// The first list is read here, so the caller has it when Subscribe
	// returns; the watch it arms goes to the goroutine.
	up := r.c.reconnected()
	ch, err := r.read(s)
	if err != nil {
		r.mu.Lock()
		if r.watches[key] == s {
			delete(r.watches, key)
		}
		r.mu.Unlock()
		return fmt.Errorf("zookeeper: subscribe %s: read %s at %s: %w", key, s.path, r.c.where, err)
	}
	r.wg.Add(1)
	go r.watch(s, ch, up)
	return nil
}

// read lists s's providers, arms a child watch and delivers the list.
func (r *Registry) read(s *subscription) (<-chan zk.Event, error) {
	for attempt := 0; ; attempt++ {
		children, _, ch, err := r.c.conn.ChildrenW(s.path)
		if errors.Is(err, zk.ErrNoNode) && attempt < 3 {
			// No provider ever registered: create the node so that the
			// watch sees the first one (Dubbo does the same).
			if err := r.c.create(s.path, nil, false); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		s.deliver(r.providers(s, children))
		return ch, nil
	}
}

// watch re-reads s's providers after every child event, and after every
// reconnect, until s stops (see client.follow).
func (r *Registry) watch(s *subscription, ch <-chan zk.Event, up <-chan struct{}) {
	defer r.wg.Done()
	r.c.follow("provider watch", s.path, s.stop, r.stop, up, ch, func() (<-chan zk.Event, error) { return r.read(s) })
}

// providers parses and filters a providers node's children, sorted by URL.
func (r *Registry) providers(s *subscription, children []string) []*kernel.URL {
	out := make([]*kernel.URL, 0, len(children))
	for _, name := range children {
		u, err := ParseNode(name)
		if err != nil {
			s.rejectedMu.Lock()
			seen := s.rejected[clip(name)]
			if !seen && len(s.rejected) < 1000 {
				s.rejected[clip(name)] = true
			}
			s.rejectedMu.Unlock()
			if !seen {
				r.log.Warn("provider node ignored: not a Dubbo URL", "node", s.path, "err", err)
			}
			continue
		}
		if isMatch(s.url, u) {
			out = append(out, u)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

func (s *subscription) deliver(urls []*kernel.URL) { s.listeners.Deliver(urls, nil, notify) }

// Unsubscribe stops notifications to listener; the watch ends with the
// service's last listener.
func (r *Registry) Unsubscribe(ctx context.Context, url *kernel.URL, listener extension.NotifyListener) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return r.unwatch(url.ServiceKey(), listener)
}

// Close ends the session: the server deletes its ephemeral nodes at once.
// Later calls return an error; Close is idempotent.
func (r *Registry) Close() error {
	r.shut()
	return nil
}
