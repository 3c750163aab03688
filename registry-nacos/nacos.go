// Package nacos is weft's distributed registry on Nacos, through the Nacos v2
// gRPC client of nacos-sdk-go/v2. It implements extension.Registry under the
// name "nacos", opened from an address URL such as
//
//	nacos://127.0.0.1:8848?namespace=dev&timeout=5000
//
// Providers are published the way Apache Dubbo publishes them, so weft and
// Dubbo consumers can read each other's registrations: the Nacos service name
// is providers:<interface>:<version>:<group> in DEFAULT_GROUP, the instance is
// the provider's host and port, and its metadata is the provider URL's
// parameters plus Dubbo's protocol, path and category keys. A subscriber
// rebuilds the provider URLs from the healthy, enabled instances and gets the
// full list at subscribe time and after every push.
//
// The SDK keeps a gRPC connection to the server (port+1000 by default, 9848
// for 8848) and re-registers and re-subscribes by itself after a reconnect.
// Its log files and snapshot cache go under os.TempDir()/weft-nacos-<pid>,
// never into the working directory.
//
// The package is also weft's application-level service discovery on Nacos
// (DiscoveryFactory, Discovery: extension.ServiceDiscovery under the same
// name), laid out as Java Dubbo and dubbo-go lay it out: each application's
// instances under the service named after it, the interface → application
// mapping in the config data id of the interface, group "mapping" (see
// discovery.go).
//
// The package is also weft's Nacos config center (ConfigFactory,
// ConfigCenter: extension.DynamicConfiguration under the same name "nacos"):
// data ids read, published and watched through the SDK's config client.
//
// weft does not build Nacos in: an App gets all three, the registry, the
// discovery and the config center, from Plugin,
//
//	app, err := weft.New(weft.WithPlugins(nacos.Plugin()), ...)
//
// and a config that names nacos:// without it fails weft.New saying so.
package nacos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// Name is the registry's extension name and address-URL protocol.
const Name = "nacos"

const (
	// DefaultPort is Nacos' HTTP port; the gRPC port is this plus 1000.
	DefaultPort = 8848
	// Group is the Nacos group every Dubbo service lives in.
	Group = constant.DEFAULT_GROUP
	// CategoryProviders is Dubbo's category of provider registrations.
	CategoryProviders = "providers"

	// Metadata keys Dubbo adds to an instance besides the URL parameters.
	metaProtocol = "protocol"
	metaPath     = kernel.KeyPath
	metaCategory = "category"
	// internalPrefix marks keys a Nacos-compatible server (PolarisMesh) adds
	// to the metadata; they are not URL parameters.
	internalPrefix = "internal-nacos-"

	defaultTimeoutMs = 5000
)

// Factory opens Nacos registries. Log receives the registry's own messages
// (nil: slog.Default()); the SDK's logs go to files under the temp directory.
type Factory struct{ Log *slog.Logger }

var _ extension.RegistryFactory = Factory{}

// connectWait bounds the wait for the SDK's first connection, and
// connectSettle is given to the SDK's event loop after it (see GetRegistry).
const (
	connectWait   = 3 * time.Second
	connectSettle = 200 * time.Millisecond
)

// GetRegistry connects to the Nacos server of url: host and port (default
// 8848), parameter namespace (default: Nacos' public namespace), timeout in
// milliseconds (default 5000) and user:password for servers with auth.
func (f Factory) GetRegistry(url *kernel.URL) (extension.Registry, error) {
	if url == nil {
		return nil, errors.New("nacos: nil registry URL")
	}
	log := f.Log
	if log == nil {
		log = slog.Default()
	}
	client, param, where, err := newNamingClient(url)
	if err != nil {
		return nil, err
	}
	log.Info("nacos registry connected", "server", where, "namespace", url.Param("namespace"))
	r := &Registry{
		catalog:    newCatalogClient(where, url, param.ClientConfig.TimeoutMs),
		registered: map[string]map[string]*kernel.URL{},
	}
	r.naming = naming[extension.NotifyListener, []*kernel.URL]{
		client: client, group: Group, where: where, log: log.With("registry", Name),
		kind: "service", errClosed: errClosed, value: r.providerURLs,
		notify: func(_ string, l extension.NotifyListener, urls []*kernel.URL) { l.Notify(urls) },
		subs:   map[string]*subscription[extension.NotifyListener, []*kernel.URL]{},
	}
	return r, nil
}

// newNamingClient connects the SDK's naming client to the server of url
// and waits for its first connection (bounded).
//
// The SDK connects in the background, and its first connection event
// re-runs every subscription, sorting in place the instance lists it has
// handed to callbacks: a Subscribe made before that event is delivered
// races with it (nacos-sdk-go v2.3.2; seen under load with -race). The
// event is delivered from the SDK's event loop shortly after the client
// reports itself healthy, which cannot be observed: wait for healthy, then
// give the loop connectSettle. A server that is down costs at most
// connectWait, and the client works once it is back.
func newNamingClient(url *kernel.URL) (naming_client.INamingClient, vo.NacosClientParam, string, error) {
	param, where, err := clientParam(url)
	if err != nil {
		return nil, param, where, err
	}
	client, err := clients.NewNamingClient(param)
	if err != nil {
		return nil, param, where, fmt.Errorf("nacos: connect %s: %w", where, err)
	}
	for deadline := time.Now().Add(connectWait); !client.ServerHealthy() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if client.ServerHealthy() {
		time.Sleep(connectSettle)
	}
	return client, param, where, nil
}

// clientParam is the SDK's client configuration for a registry or config
// center address: host and port (default 8848), namespace, timeout in ms
// (default 5000), user:password, sdk.loglevel. where names the server in
// messages.
func clientParam(url *kernel.URL) (param vo.NacosClientParam, where string, err error) {
	if url == nil {
		return param, "", errors.New("nacos: nil address URL")
	}
	host := url.Host
	if host == "" {
		host = "127.0.0.1"
	}
	port := url.Port
	if port == 0 {
		port = DefaultPort
	}
	where = fmt.Sprintf("%s:%d", host, port)
	timeout := url.ParamInt("timeout", defaultTimeoutMs)
	if timeout <= 0 {
		return param, where, fmt.Errorf("nacos: %s: timeout must be positive", url)
	}
	base := filepath.Join(os.TempDir(), "weft-nacos-"+strconv.Itoa(os.Getpid()))
	cc := constant.NewClientConfig(
		constant.WithNamespaceId(url.Param("namespace")),
		constant.WithTimeoutMs(uint64(timeout)),
		constant.WithAppName(url.ParamOr(kernel.KeyApplication, "weft")),
		constant.WithLogDir(filepath.Join(base, "log")),
		constant.WithCacheDir(filepath.Join(base, "cache")),
		constant.WithLogLevel(url.ParamOr("sdk.loglevel", "warn")),
		constant.WithNotLoadCacheAtStart(true),
		// What the server says, never a stale local copy.
		constant.WithDisableUseSnapShot(true),
		// Deliver empty lists too: the listener decides what they mean.
		constant.WithUpdateCacheWhenEmpty(true),
		constant.WithUsername(url.Username),
		constant.WithPassword(url.Password),
	)
	sc := []constant.ServerConfig{*constant.NewServerConfig(host, uint64(port))}
	return vo.NacosClientParam{ClientConfig: cc, ServerConfigs: sc}, where, nil
}

// Registry is a Nacos registry connection. It is safe for concurrent use.
type Registry struct {
	// naming's subscriptions are to provider services, by Nacos service
	// name; its mu guards registered too.
	naming[extension.NotifyListener, []*kernel.URL]
	catalog *catalogClient // Providers' reads, over the open HTTP API

	// registered: Nacos service name -> provider URL string -> URL. One
	// client publishes one instance per service unless it batch-registers,
	// so all of a service's URLs are (re)published together.
	registered map[string]map[string]*kernel.URL
}

var _ extension.Registry = (*Registry)(nil)

// ServiceName is Dubbo's Nacos service name of url's service:
// providers:<interface>:<version>:<group>.
func ServiceName(url *kernel.URL) string {
	return CategoryProviders + ":" + url.Interface() + ":" + url.Param(kernel.KeyVersion) + ":" + url.Param(kernel.KeyGroup)
}

var errClosed = errors.New("nacos: registry closed")

// Register publishes the provider url. Consumer URLs are not published, as
// Dubbo's NacosRegistry does by default (register-consumer-url=false).
func (r *Registry) Register(ctx context.Context, url *kernel.URL) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if extension.IsConsumer(url) {
		return nil
	}
	if url.Host == "" || url.Port <= 0 {
		return fmt.Errorf("nacos: register %s: provider URL needs host and port", url)
	}
	svc := ServiceName(url)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return errClosed
	}
	urls := r.registered[svc]
	if _, ok := urls[url.String()]; ok {
		return nil
	}
	next := make(map[string]*kernel.URL, len(urls)+1)
	for k, v := range urls {
		next[k] = v
	}
	next[url.String()] = url
	if err := r.publish(svc, next, nil); err != nil {
		return fmt.Errorf("nacos: register %s: %w", url, err)
	}
	r.registered[svc] = next
	r.log.Debug("registered", "service", svc, "url", url.String())
	return nil
}

// Unregister withdraws the provider url.
func (r *Registry) Unregister(ctx context.Context, url *kernel.URL) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if extension.IsConsumer(url) {
		return nil
	}
	svc := ServiceName(url)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return errClosed
	}
	urls := r.registered[svc]
	if _, ok := urls[url.String()]; !ok {
		return nil
	}
	next := make(map[string]*kernel.URL, len(urls))
	for k, v := range urls {
		if k != url.String() {
			next[k] = v
		}
	}
	if err := r.publish(svc, next, url); err != nil {
		return fmt.Errorf("nacos: unregister %s: %w", url, err)
	}
	if len(next) == 0 {
		delete(r.registered, svc)
	} else {
		r.registered[svc] = next
	}
	r.log.Debug("unregistered", "service", svc, "url", url.String())
	return nil
}

// publish makes urls the client's instances of svc; removed is the URL
// being withdrawn, if any. Called with r.mu held.
//
// Nacos servers differ on what a batch replaces (PolarisMesh keeps
// instances missing from a new batch), so a withdrawn URL is deregistered
// explicitly, and the remaining ones are published again as one batch: that
// also resets the SDK's redo record, which re-registers them after a
// reconnect.
func (r *Registry) publish(svc string, urls map[string]*kernel.URL, removed *kernel.URL) error {
	if removed != nil {
		ok, err := r.client.DeregisterInstance(vo.DeregisterInstanceParam{
			Ip: removed.Host, Port: uint64(removed.Port),
			ServiceName: svc, GroupName: Group, Ephemeral: true,
		})
		if err := result(ok, err); err != nil || len(urls) == 0 {
			return err
		}
	}
	keys := make([]string, 0, len(urls))
	for k := range urls {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	batch := vo.BatchRegisterInstanceParam{ServiceName: svc, GroupName: Group}
	for _, k := range keys {
		batch.Instances = append(batch.Instances, instance(svc, urls[k]))
	}
	ok, err := r.client.BatchRegisterInstance(batch)
	return result(ok, err)
}

func result(ok bool, err error) error {
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("server refused")
	}
	return nil
}

func instance(svc string, u *kernel.URL) vo.RegisterInstanceParam {
	md := u.Params()
	md[metaProtocol] = u.Protocol
	md[metaPath] = u.Path
	md[metaCategory] = CategoryProviders
	return vo.RegisterInstanceParam{
		Ip: u.Host, Port: uint64(u.Port), Weight: 1,
		Enable: true, Healthy: true, Ephemeral: true,
		Metadata: md, ServiceName: svc, GroupName: Group,
	}
}

// providerURL rebuilds a provider URL from an instance: the inverse of
// instance. Keys the server adds (internal-nacos-*) and Dubbo's protocol,
// path and category keys are not parameters.
func providerURL(in model.Instance) (*kernel.URL, bool) {
	proto := in.Metadata[metaProtocol]
	if proto == "" || in.Ip == "" || in.Port == 0 {
		return nil, false
	}
	params := make(map[string]string, len(in.Metadata))
	for k, v := range in.Metadata {
		switch {
		case k == metaProtocol, k == metaPath, k == metaCategory, strings.HasPrefix(k, internalPrefix):
		default:
			params[k] = v
		}
	}
	return kernel.NewURL(proto, in.Ip, int(in.Port), in.Metadata[metaPath], params), true
}

func (r *Registry) providerURLs(svc string, ins []model.Instance) []*kernel.URL {
	urls := make([]*kernel.URL, 0, len(ins))
	for _, in := range ins {
		if !in.Healthy || !in.Enable {
			continue
		}
		u, ok := providerURL(in)
		if !ok {
			r.log.Warn("instance is not a provider URL, ignored", "service", svc, "ip", in.Ip, "port", in.Port)
			continue
		}
		urls = append(urls, u)
	}
	sort.Slice(urls, func(i, j int) bool { return urls[i].String() < urls[j].String() })
	return urls
}

// Subscribe calls listener with the full provider list of url's service now
// and after every change. listener must be comparable (a pointer, usually):
// Unsubscribe finds it by ==.
func (r *Registry) Subscribe(ctx context.Context, url *kernel.URL, listener extension.NotifyListener) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if listener == nil {
		return errors.New("nacos: subscribe: nil listener")
	}
	return r.subscribe(ServiceName(url), listener)
}

// Unsubscribe stops notifications to listener; the SDK subscription ends
// with the service's last listener.
func (r *Registry) Unsubscribe(ctx context.Context, url *kernel.URL, listener extension.NotifyListener) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return r.unsubscribe(ServiceName(url), listener)
}

// Close withdraws this registry's providers, ends its subscriptions and
// closes the connection. Later calls return an error; Close is idempotent.
func (r *Registry) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	errs := r.unsubscribeAll()
	for svc, urls := range r.registered {
		for _, u := range urls {
			if _, err := r.client.DeregisterInstance(vo.DeregisterInstanceParam{
				Ip: u.Host, Port: uint64(u.Port), ServiceName: svc, GroupName: Group, Ephemeral: true,
			}); err != nil {
				errs = append(errs, fmt.Errorf("deregister %s: %w", u, err))
			}
		}
	}
	r.registered = nil
	r.mu.Unlock()
	r.client.CloseClient()
	if len(errs) > 0 {
		return fmt.Errorf("nacos: close: %w", errors.Join(errs...))
	}
	return nil
}

var _ extension.Catalog = (*Registry)(nil)

// Providers lists the healthy, enabled providers of every Dubbo provider
// service (providers:<interface>:<version>:<group>) in the registry's
// namespace and group, by service key. It reads Nacos's open HTTP API
// (/nacos/v1/ns/...), not the SDK: every SDK read subscribes to the service
// it reads, so a listing would leave a subscription to every service of
// the namespace (and the server pushing to it). A service whose instances
// cannot be read is named in the error, the others still listed.
func (r *Registry) Providers(ctx context.Context) (map[string][]*kernel.URL, error) {
	names, err := r.catalog.services(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string][]*kernel.URL{}
	var errs []error
	for _, svc := range names {
		if !strings.HasPrefix(svc, CategoryProviders+":") {
			continue
		}
		ins, err := r.catalog.instances(ctx, svc)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, u := range r.providerURLs(svc, ins) {
			out[u.ServiceKey()] = append(out[u.ServiceKey()], u)
		}
	}
	return out, errors.Join(errs...)
}
