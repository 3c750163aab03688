// Command dubbogo-app-nacos runs the dubbo-go v3.3.1 side of the application-level
// discovery interop tests through Nacos: a dubbo-go provider of
// org.weft.bench.EchoService registered at application level only (Dubbo
// 3's instance mode: its instance under the application's name, the
// interface -> application mapping, its MetadataService), or a dubbo-go
// consumer that finds a provider of it at application level (the mapping,
// the instances, each revision's metadata from the instance's
// MetadataService) and makes one echo call. Classic dubbo protocol,
// hessian2. A child process of the tests, because dubbo-go keeps all of
// this in process-global state.
//
//	dubbogo-app-nacos -mode provider -addr 127.0.0.1:20880 -nacos 127.0.0.1:8848 -namespace NS -app NAME
//	dubbogo-app-nacos -mode call -nacos 127.0.0.1:8848 -namespace NS -app NAME -msg hello -wait 30s
//
// The provider prints "listening <addr>" on stdout once registered and runs
// until killed. The consumer retries the call until it succeeds or -wait
// passes (the provider's instance and mapping reach it by Nacos pushes),
// then prints the reply on stdout, or the last error on stderr with exit
// status 1.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"reflect"
	"strconv"
	"time"
	"unsafe" // the MetadataService's listener, see shareServer

	hessian "github.com/apache/dubbo-go-hessian2"

	"dubbo.apache.org/dubbo-go/v3/client"
	_ "dubbo.apache.org/dubbo-go/v3/cluster/cluster/failfast"
	_ "dubbo.apache.org/dubbo-go/v3/cluster/loadbalance/random"
	"dubbo.apache.org/dubbo-go/v3/common/constant"
	_ "dubbo.apache.org/dubbo-go/v3/filter/echo"
	_ "dubbo.apache.org/dubbo-go/v3/filter/generic"
	_ "dubbo.apache.org/dubbo-go/v3/filter/graceful_shutdown"
	_ "dubbo.apache.org/dubbo-go/v3/filter/token"
	"dubbo.apache.org/dubbo-go/v3/global"
	"dubbo.apache.org/dubbo-go/v3/graceful_shutdown"
	"dubbo.apache.org/dubbo-go/v3/metadata"
	// The mapping (ServiceNameMapping over the metadata report) and the
	// Nacos metadata report that stores it.
	_ "dubbo.apache.org/dubbo-go/v3/metadata/mapping/metadata"
	_ "dubbo.apache.org/dubbo-go/v3/metadata/report/nacos"
	"dubbo.apache.org/dubbo-go/v3/protocol"
	dubboproto "dubbo.apache.org/dubbo-go/v3/protocol/dubbo"
	_ "dubbo.apache.org/dubbo-go/v3/proxy/proxy_factory"
	"dubbo.apache.org/dubbo-go/v3/registry"
	_ "dubbo.apache.org/dubbo-go/v3/registry/directory"
	"dubbo.apache.org/dubbo-go/v3/registry/exposed_tmp"
	// Nacos' service discovery and the service-discovery registry
	// (application level) with its instance customizers.
	_ "dubbo.apache.org/dubbo-go/v3/registry/nacos"
	_ "dubbo.apache.org/dubbo-go/v3/registry/protocol"
	_ "dubbo.apache.org/dubbo-go/v3/registry/servicediscovery"
	"dubbo.apache.org/dubbo-go/v3/remoting"
	"dubbo.apache.org/dubbo-go/v3/server"

	"github.com/weftrpc/weft/test/interop/dubbogo"
)

func main() {
	var (
		mode      = flag.String("mode", "provider", "provider or call")
		addr      = flag.String("addr", "127.0.0.1:20880", "provider: where to listen (host:port)")
		nacosAddr = flag.String("nacos", "127.0.0.1:8848", "the Nacos server")
		namespace = flag.String("namespace", "", "the Nacos namespace")
		app       = flag.String("app", "dubbogo-app", "this side's application name")
		msg       = flag.String("msg", "hello", "call: the string to echo")
		wait      = flag.Duration("wait", 30*time.Second, "call: how long to retry until a provider is found")
		logLevel  = flag.String("log", "error", "dubbo-go log level")
	)
	flag.Parse()
	dubbogo.SetLogLevel(*logLevel)
	hessian.RegisterPOJO(&dubbogo.User{})
	reg := []registry.Option{
		registry.WithID("nacos"),
		registry.WithNacos(),
		registry.WithAddress(*nacosAddr),
		registry.WithNamespace(*namespace),
		// Application level only: the service-discovery registry, its
		// instance and mapping, no interface-level registration.
		registry.WithRegisterService(),
		registry.WithoutUseAsConfigCenter(),
		registry.WithTimeout(10 * time.Second),
	}
	var err error
	switch *mode {
	case "provider":
		err = provide(*addr, *app, reg)
	case "call":
		var got string
		if got, err = call(*app, *msg, *wait, reg); err == nil {
			fmt.Println(got)
		}
	default:
		err = fmt.Errorf("unknown -mode %q (want provider or call)", *mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dubbogo-app:", err)
		os.Exit(1)
	}
}

// provide does what dubbo-go's Server.Serve does, in its order, except
// that the MetadataService shares the service's loopback listener: Serve
// would export it on ":port" (every interface), since its URL has no host.
func provide(addr, app string, reg []registry.Option) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("dubbo-go panicked: %v", r)
		}
	}()
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || host == "" {
		return fmt.Errorf("-addr %q: want host:port with both", addr)
	}
	regOpts := registry.NewOptions(reg...)
	srv, err := server.NewServer(
		server.WithServerProtocol(protocol.WithDubbo(), protocol.WithIp(host), protocol.WithPort(port)),
		server.WithServerSerialization(constant.Hessian2Serialization),
		server.SetServerTLS(nil),
		server.SetServerShutdown(graceful_shutdown.NewOptions(graceful_shutdown.WithoutInternalSignal()).Shutdown),
		server.WithServerRegistry(reg...),
		server.SetServerApplication(&global.ApplicationConfig{Name: app, MetadataType: constant.DefaultMetadataStorageType}),
	)
	if err != nil {
		return fmt.Errorf("new server: %w", err)
	}
	// The mapping is written through the registry's metadata report.
	if err := metadata.InitRegistryMetadataReport(map[string]*global.RegistryConfig{regOpts.ID: regOpts.Registry}); err != nil {
		return fmt.Errorf("metadata report: %w", err)
	}
	svc := &dubbogo.EchoService{}
	if err := srv.Register(svc, nil, server.WithInterface(dubbogo.Interface)); err != nil {
		return fmt.Errorf("register: %w", err)
	}
	svcOpts := srv.GetServiceOptions(svc.Reference())
	if svcOpts == nil {
		return errors.New("registered service options not found")
	}
	// Adds the service to the application's metadata and maps the
	// interface to the application.
	if err := svcOpts.Export(); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if err := shareServer(addr, ":"+portStr); err != nil {
		return err
	}
	if err := metadata.NewOptions(
		metadata.WithAppName(app),
		metadata.WithMetadataType(constant.DefaultMetadataStorageType),
		metadata.WithPort(port),
		metadata.WithMetadataProtocol(constant.DefaultProtocol),
	).Init(); err != nil {
		return fmt.Errorf("export the MetadataService: %w", err)
	}
	if err := exposed_tmp.RegisterServiceInstance(); err != nil {
		return fmt.Errorf("register the instance: %w", err)
	}
	fmt.Printf("listening %s\n", addr)
	select {}
}

// shareServer makes the dubbo protocol's server of location from serve
// alias as well: DubboProtocol opens one server per URL location, and the
// MetadataService's URL has the location ":port", which would bind every
// interface. Its requests are dispatched by service key, whichever server
// they come in on. The map is private: reached by reflection, the layout
// pinned by the dubbo-go version in go.mod.
func shareServer(from, alias string) error {
	dp, ok := dubboproto.GetProtocol().(*dubboproto.DubboProtocol)
	if !ok {
		return errors.New("the dubbo protocol is not a *DubboProtocol")
	}
	f := reflect.ValueOf(dp).Elem().FieldByName("serverMap")
	if !f.IsValid() || f.Type() != reflect.TypeOf(map[string]*remoting.ExchangeServer(nil)) {
		return errors.New("DubboProtocol has no serverMap of the expected type (dubbo-go version changed?)")
	}
	m := reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Interface().(map[string]*remoting.ExchangeServer)
	s := m[from]
	if s == nil {
		return fmt.Errorf("no dubbo server at %s", from)
	}
	m[alias] = s
	return nil
}

// call is a dubbo-go consumer at application level: Dial finds the
// applications of the interface in the mapping and subscribes to their
// instances; calls are retried until one succeeds or wait passes.
func call(app, msg string, wait time.Duration, reg []registry.Option) (out string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("dubbo-go panicked: %v", r)
		}
	}()
	cli, err := client.NewClient(
		client.WithClientProtocolDubbo(),
		client.WithClientSerialization(constant.Hessian2Serialization),
		client.WithClientClusterFailFast(),
		client.WithClientRetries(0),
		client.WithClientRequestTimeout(3*time.Second),
		client.WithClientNoCheck(),
		client.SetClientTLS(nil),
		client.WithClientShutdown(graceful_shutdown.WithoutInternalSignal()),
		client.WithClientRegistry(reg...),
		client.SetClientApplication(&global.ApplicationConfig{Name: app}),
	)
	if err != nil {
		return "", fmt.Errorf("new client: %w", err)
	}
	// dubbo-go's application-level consumer takes the tri protocol's
	// providers unless the reference names its protocol.
	conn, err := cli.Dial(dubbogo.Interface, client.WithProtocolDubbo())
	if err != nil {
		return "", fmt.Errorf("dial: %w", err)
	}
	deadline := time.Now().Add(wait)
	for {
		err = callOnce(conn, msg, &out)
		if err == nil {
			return out, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no successful echo within %v: %w", wait, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// callOnce turns the failfast cluster's panic without an invoker into an
// error.
func callOnce(conn *client.Connection, msg string, out *string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("dubbo-go panicked: %v", r)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return conn.CallUnary(ctx, []any{msg}, out, "echo", client.WithCallRequestTimeout(3*time.Second))
}
