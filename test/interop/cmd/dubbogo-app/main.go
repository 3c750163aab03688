// Command dubbogo-app is a real dubbo-go v3.3.1 peer at application level
// (Dubbo 3's service discovery) through ZooKeeper, in its own process:
// dubbo-go's application-level machinery (its ServiceDiscoveryRegistry,
// the metadata report it makes of the registry, the MetadataService it
// exports) is process-global state that must not meet a test process.
//
//	dubbogo-app -mode provider -zk 127.0.0.1:2181 -app go-app -addr 127.0.0.1:20880
//	dubbogo-app -mode call -zk 127.0.0.1:2181 -app go-client -msg hello
//
// Both use the registry as dubbo-go's `registry-type: service` configures
// it (registry.WithRegisterService): instances under /services/<app>, the
// interface → application mapping under /dubbo/mapping/<interface> (the
// registry doubles as metadata report, dubbo-go's default), the metadata
// itself served by each instance's MetadataService (storage type local),
// exported over the dubbo protocol (dubbo-go's default would be triple).
//
// The provider serves org.weft.bench.EchoService (../../dubbogo) over the
// dubbo protocol on -addr, prints "listening <addr>" on stdout once it
// answers there, and runs until SIGINT or SIGTERM. Its MetadataService
// listens on a free port of every interface (dubbo-go binds it so).
//
// The consumer reads the mapping of the interface, watches the mapped
// applications' instances, fetches their metadata and calls echo(-msg)
// over the dubbo protocol (named on the reference: dubbo-go's
// application-level consumer takes triple otherwise), retrying until a
// call succeeds or -wait passes. It prints the reply as the last line on
// stdout (dubbo-go logs there too), or the last error on stderr with exit
// status 1.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	hessian "github.com/apache/dubbo-go-hessian2"
	gostlog "github.com/dubbogo/gost/log/logger"

	dubbo "dubbo.apache.org/dubbo-go/v3"
	"dubbo.apache.org/dubbo-go/v3/client"
	"dubbo.apache.org/dubbo-go/v3/common/constant"
	"dubbo.apache.org/dubbo-go/v3/graceful_shutdown"
	"dubbo.apache.org/dubbo-go/v3/logger"
	"dubbo.apache.org/dubbo-go/v3/protocol"
	"dubbo.apache.org/dubbo-go/v3/registry"
	"dubbo.apache.org/dubbo-go/v3/server"

	// dubbo-go registers its plugins from init functions; these are the
	// ones the application-level dubbo path over ZooKeeper needs (the
	// whole dubbo-go/v3/imports would pull modules this module does not
	// pin: etcd, apollo, jaeger...).
	_ "dubbo.apache.org/dubbo-go/v3/cluster/cluster/failfast"
	_ "dubbo.apache.org/dubbo-go/v3/cluster/cluster/failover"
	_ "dubbo.apache.org/dubbo-go/v3/cluster/loadbalance/random"
	_ "dubbo.apache.org/dubbo-go/v3/filter/accesslog"
	_ "dubbo.apache.org/dubbo-go/v3/filter/echo"
	_ "dubbo.apache.org/dubbo-go/v3/filter/exec_limit"
	_ "dubbo.apache.org/dubbo-go/v3/filter/generic"
	_ "dubbo.apache.org/dubbo-go/v3/filter/graceful_shutdown"
	_ "dubbo.apache.org/dubbo-go/v3/filter/token"
	_ "dubbo.apache.org/dubbo-go/v3/filter/tps"
	_ "dubbo.apache.org/dubbo-go/v3/metadata/mapping/metadata"
	_ "dubbo.apache.org/dubbo-go/v3/metadata/report/zookeeper"
	_ "dubbo.apache.org/dubbo-go/v3/protocol/dubbo"
	_ "dubbo.apache.org/dubbo-go/v3/proxy/proxy_factory"
	_ "dubbo.apache.org/dubbo-go/v3/registry/directory"
	_ "dubbo.apache.org/dubbo-go/v3/registry/protocol"
	_ "dubbo.apache.org/dubbo-go/v3/registry/servicediscovery"
	_ "dubbo.apache.org/dubbo-go/v3/registry/servicediscovery/instance/random"
	_ "dubbo.apache.org/dubbo-go/v3/registry/zookeeper"

	"github.com/weftrpc/weft/test/interop/dubbogo"
)

// logLevel is -log, for every dubbo-go logger set-up.
var logLevel = "warn"

// svc is how the provider serves EchoService (its flags).
var svc struct {
	iface, group, version, regGroup string
	tri, interfaceLevel             bool
}

func main() {
	var (
		mode   = flag.String("mode", "provider", "provider or call")
		zkAddr = flag.String("zk", "127.0.0.1:2181", "ZooKeeper host:port")
		app    = flag.String("app", "", "this process's application name (required)")
		addr   = flag.String("addr", "127.0.0.1:20880", "provider: where the dubbo protocol listens")
		msg    = flag.String("msg", "hello", "call: the string to echo")
		wait   = flag.Duration("wait", 20*time.Second, "call: how long to retry until a call succeeds")
		level  = flag.String("log", "warn", "dubbo-go log level: debug, info, warn, error")
	)
	// As the server of the dubbo-go-samples configs: EchoService under
	// another interface name, over Triple, registered at interface level
	// too, under a registry group, a service group and a version.
	flag.StringVar(&svc.iface, "interface", dubbogo.Interface, "provider: the interface EchoService is registered as")
	flag.BoolVar(&svc.tri, "tri", false, "provider: serve Triple instead of dubbo")
	flag.StringVar(&svc.group, "group", "", "provider: the service's group")
	flag.StringVar(&svc.version, "version", "", "provider: the service's version")
	flag.StringVar(&svc.regGroup, "registry-group", "", "provider: the registry's group (ZooKeeper root)")
	flag.BoolVar(&svc.interfaceLevel, "interface-level", false, "provider: register the interface too, not only the application")
	flag.Parse()
	logLevel = *level
	gostlog.SetLoggerLevel(logLevel)
	hessian.RegisterPOJO(&dubbogo.User{})
	var err error
	switch {
	case *app == "":
		err = errors.New("-app is required")
	case *mode == "provider":
		err = provide(*zkAddr, *app, *addr)
	case *mode == "call":
		err = call(*zkAddr, *app, *msg, *wait)
	default:
		err = fmt.Errorf("unknown -mode %q (want provider or call)", *mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dubbogo-app:", err)
		os.Exit(1)
	}
}

// instance is a dubbo-go instance named app whose registry is the
// ZooKeeper at zkAddr, at application level only.
func instance(zkAddr, app string, opts ...dubbo.InstanceOption) (*dubbo.Instance, error) {
	return dubbo.NewInstance(append([]dubbo.InstanceOption{
		dubbo.WithName(app),
		// The instance sets up dubbo-go's logger again, from its own
		// options: the level must be given here too.
		dubbo.WithLogger(logger.WithZap(), logger.WithLevel(logLevel)),
		dubbo.WithRegistry(registryOptions(zkAddr)...),
		dubbo.WithShutdown(graceful_shutdown.WithoutInternalSignal()),
	}, opts...)...)
}

func registryOptions(zkAddr string) []registry.Option {
	opts := []registry.Option{
		registry.WithZookeeper(),
		registry.WithAddress(zkAddr),
		registry.WithRegisterService(),
		registry.WithoutUseAsConfigCenter(),
		registry.WithTimeout(10 * time.Second),
	}
	if svc.interfaceLevel {
		opts = append(opts, registry.WithRegisterServiceAndInterface())
	}
	if svc.regGroup != "" {
		opts = append(opts, registry.WithGroup(svc.regGroup))
	}
	return opts
}

func provide(zkAddr, app, addr string) error {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("-addr %q: %w", addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port <= 0 {
		return fmt.Errorf("-addr %q needs an explicit port", addr)
	}
	// The MetadataService gets a port of its own: by default dubbo-go
	// exports it on the dubbo protocol's port but on every interface,
	// which then collides with the service's 127.0.0.1 listener.
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	metaPort := probe.Addr().(*net.TCPAddr).Port
	probe.Close()
	proto := protocol.WithDubbo()
	if svc.tri {
		proto = protocol.WithTriple()
	}
	ins, err := instance(zkAddr, app,
		dubbo.WithProtocol(proto, protocol.WithIp(host), protocol.WithPort(port)),
		dubbo.WithMetadataServiceProtocol(constant.DefaultProtocol),
		dubbo.WithMetadataServicePort(metaPort))
	if err != nil {
		return err
	}
	// See ../../dubbogo's doc: the default TLS config turns getty's SSL on.
	srv, err := ins.NewServer(server.SetServerTLS(nil))
	if err != nil {
		return err
	}
	sopts := []server.ServiceOption{server.WithInterface(svc.iface)}
	if svc.group != "" {
		sopts = append(sopts, server.WithGroup(svc.group))
	}
	if svc.version != "" {
		sopts = append(sopts, server.WithVersion(svc.version))
	}
	if svc.tri {
		// A non-IDL service over Triple: dubbo-go's RegisterService,
		// hessian2 in the wrapper, as its samples serve one.
		err = srv.RegisterService(&dubbogo.EchoService{}, append(sopts, server.WithSerialization(constant.Hessian2Serialization))...)
	} else {
		err = srv.Register(&dubbogo.EchoService{}, nil, sopts...)
	}
	if err != nil {
		return err
	}
	// Serve exports, registers the instance, then blocks forever.
	failed := make(chan error, 1)
	go func() { failed <- srv.Serve() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		select {
		case err := <-failed:
			return fmt.Errorf("serve: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s does not answer 30 s after Serve: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Printf("listening %s\n", addr)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case <-sig:
	case err := <-failed:
		return fmt.Errorf("serve: %v", err)
	}
	fmt.Fprintf(os.Stderr, "stopped; echo=%d\n", dubbogo.EchoCalls.Load())
	return nil
}

func call(zkAddr, app, msg string, wait time.Duration) error {
	ins, err := instance(zkAddr, app)
	if err != nil {
		return err
	}
	cli, err := ins.NewClient(
		client.WithClientSerialization(constant.Hessian2Serialization),
		client.WithClientClusterFailFast(),
		client.WithClientRetries(0),
		client.WithClientRequestTimeout(3*time.Second),
		client.WithClientNoCheck(),
		client.SetClientTLS(nil),
	)
	if err != nil {
		return err
	}
	conn, err := cli.Dial(dubbogo.Interface, client.WithProtocolDubbo())
	if err != nil {
		return err
	}
	deadline := time.Now().Add(wait)
	for {
		var out string
		err := callOnce(conn, msg, &out)
		if err == nil {
			fmt.Println(out)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no successful echo within %v: %w", wait, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// callOnce turns dubbo-go's panic on an empty directory (failfast with
// no invoker) into an error.
func callOnce(conn *client.Connection, msg string, out *string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("dubbo-go panicked: %v", r)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return conn.CallUnary(ctx, []any{msg}, out, "echo")
}
