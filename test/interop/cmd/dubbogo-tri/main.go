// Command dubbogo-tri is a real dubbo-go v3.3.1 peer over the Triple
// protocol, in its own process (dubbo-go keeps its services, protocols and
// settings in process-global state, which must not meet a test process).
// Direct URLs, no registry.
//
//	dubbogo-tri -mode provider -addr 127.0.0.1:50051
//	dubbogo-tri -mode call -addr 127.0.0.1:50051 -kind idl|nonidl -msg hello
//
// # Provider
//
// One dubbo-go Triple server on -addr (host:port, both required) serving:
//
//   - non-IDL org.weft.bench.EchoService (server.RegisterService, hessian2):
//     Echo(ctx, string) (string, error), GetUser(ctx, int64) (*User, error)
//     with User the POJO org.weft.bench.User of ../../dubbogo, and
//     Fail(ctx, string) error. Echo sets the reply attachment x-resp =
//     "resp-"+x-req when the request carries x-req.
//   - IDL weftbench.echo.EchoService (server.Register with a hand-written
//     common.ServiceInfo, as protoc-gen-go-triple generates it) with
//     Echo(*echopb.EchoRequest) (*echopb.EchoReply, error), which sets
//     x-resp the same way.
//
// It prints "listening <addr>" on stdout once a TCP connection to the
// address succeeds, and runs until SIGINT or SIGTERM.
//
// # Call
//
// A dubbo-go Triple consumer (client.DialWithInfo, as protoc-gen-go-triple's
// stubs dial) of -addr. -kind idl calls weftbench.echo.EchoService.Echo
// with protobuf, then Echo("fail"), which both providers (dubbo-go's here,
// weft's in the tests) answer with the error "fail: idl"; -kind nonidl
// calls org.weft.bench.EchoService's Echo, GetUser(7) and Fail(-msg) with
// hessian2. The first Echo sends the attachment x-req = -att. It prints one
// JSON object on stdout (see result) and exits 0, or prints the error on
// stderr and exits 1 when a call fails that should not, or succeeds that
// should fail. The expected error's text goes into the object.
//
// # What dubbo-go 3.3.1 does on Triple (read from its source, seen here)
//
// Method names: the path is /<interface>/<Method>. A non-IDL provider
// (RegisterService) serves the Go method names only (Echo, GetUser, Fail,
// plus $invoke): createServiceInfoWithReflection adds no lower-case twin,
// and the HTTP mux is exact, so /org.weft.bench.EchoService/echo (what a
// Java or default weft consumer sends) gets HTTP 404. An IDL provider
// (Register with a ServiceInfo) serves each method under both first-letter
// cases (enhanceServiceInfo). Its consumer sends the name given to
// CallUnary, and only for the methods named in ClientInfo.MethodNames.
//
// Content type: application/grpc+proto for IDL, application/grpc+hessian2
// for non-IDL; the answer echoes the request's. The non-IDL message is a
// TripleRequestWrapper both ways (serializeType "hessian2"; argTypes from
// Go types: java.lang.String, long, ...), the answer a wrapper of one arg.
//
// Errors: a non-IDL method's error (ProxyInvoker) is grpc-status 2
// (UNKNOWN) with the text as grpc-message; an IDL method's error
// (infoProxyInvoker wraps it as triple's CodeBizError) is grpc-status 17,
// a code outside gRPC's 0..16. Neither sends tri-exception-code.
//
// Attachments: request headers (names lower-cased, values []string) are the
// provider's attachments, in ctx.Value(constant.AttachmentKey). A non-IDL
// provider's ProxyInvoker returns that same map as the result's
// attachments, and the handler sends every string or []string in it back
// as a trailer: so a method sets a reply attachment by writing into the
// map, and every request header comes back too. An IDL method's result has
// no attachments; it sets a trailer with triple_protocol's
// AppendToOutgoingContext on its ctx, which shares the map the handler
// reads. The consumer sends ctx's outgoing headers
// (tri.AppendToOutgoingContext) and, when there were some, puts the reply
// trailers back into the same ctx for tri.FromIncomingContext. It also
// sends the invocation's attachments as headers: interface, retries (empty)
// and timeout, the latter as a Go duration ("3s"), where Dubbo's timeout
// attachment is milliseconds; the deadline itself goes as grpc-timeout.
//
// Serving: a server's first exported service starts it and may be either
// kind; every later one on the address is added by RefreshService, which
// takes only services with a ServiceInfo (a non-IDL one goes to the old
// config path and is silently not served). So the non-IDL service is
// exported first. dubbo-go binds in a goroutine and only logs a failure,
// hence the probe before and the dial after.
//
// The IDL method's error is "fail: idl" at grpc-status 17 for weft too: it
// is no gRPC status, and Java Dubbo does not accept it either, so weft's
// consumer reports an unknown error (not a business one) with the text.
package main

import (
	"context"
	"encoding/json"
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

	"dubbo.apache.org/dubbo-go/v3/client"
	"dubbo.apache.org/dubbo-go/v3/common/constant"
	"dubbo.apache.org/dubbo-go/v3/graceful_shutdown"
	"dubbo.apache.org/dubbo-go/v3/protocol"
	_ "dubbo.apache.org/dubbo-go/v3/protocol/triple"
	tri "dubbo.apache.org/dubbo-go/v3/protocol/triple/triple_protocol"
	"dubbo.apache.org/dubbo-go/v3/server"

	"github.com/weftrpc/weft/apps/examples/echo/echopb"
	// The dubbo-go filters, cluster, load balancer and proxy factory the
	// default chains need, and User; the package's own dubbo-protocol
	// provider and consumer are not used here.
	"github.com/weftrpc/weft/test/interop/dubbogo"
)

// IDLInterface is the protobuf service's name.
const IDLInterface = "weftbench.echo.EchoService"

func main() {
	var (
		mode     = flag.String("mode", "provider", "provider or call")
		addr     = flag.String("addr", "127.0.0.1:50051", "provider address: where to listen (provider) or connect (call)")
		kind     = flag.String("kind", "nonidl", "call: idl (protobuf) or nonidl (hessian2)")
		msg      = flag.String("msg", "hello", "call: the string to echo (and Fail's argument)")
		att      = flag.String("att", "42", "call: the x-req attachment every Echo sends")
		timeout  = flag.Duration("timeout", 3*time.Second, "call: per-call timeout")
		logLevel = flag.String("log", "error", "dubbo-go log level: debug, info, warn, error")
	)
	flag.Parse()
	dubbogo.SetLogLevel(*logLevel)
	hessian.RegisterPOJO(&dubbogo.User{})
	var err error
	switch *mode {
	case "provider":
		err = provide(*addr)
	case "call":
		err = call(*addr, *kind, *msg, *att, *timeout)
	default:
		err = fmt.Errorf("unknown -mode %q (want provider or call)", *mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dubbogo-tri:", err)
		os.Exit(1)
	}
}

// NonIDLService is org.weft.bench.EchoService, non-IDL. dubbo-go serves
// exported types only.
type NonIDLService struct{}

func (*NonIDLService) Reference() string { return dubbogo.Interface }

// Echo returns s and sets x-resp from x-req (see the package doc).
func (*NonIDLService) Echo(ctx context.Context, s string) (string, error) {
	if m, ok := ctx.Value(constant.AttachmentKey).(map[string]any); ok {
		if v := first(m[dubbogo.ReqAttachment]); v != "" {
			// m is also the result's attachments, sent back as trailers.
			m[dubbogo.RespAttachment] = "resp-" + v
		}
	}
	return s, nil
}

func (*NonIDLService) GetUser(_ context.Context, id int64) (*dubbogo.User, error) {
	return dubbogo.NewUser(id), nil
}

func (*NonIDLService) Fail(_ context.Context, s string) error {
	return errors.New("fail: " + s)
}

// first is an attachment's value: dubbo-go gives request headers as
// []string.
func first(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []string:
		if len(x) > 0 {
			return x[0]
		}
	}
	return ""
}

// IDLService is weftbench.echo.EchoService.
type IDLService struct{}

func (*IDLService) Reference() string { return IDLInterface }

// Echo returns the message, or for the message "fail" the error "fail:
// idl", and sets x-resp from x-req.
func (*IDLService) Echo(ctx context.Context, in *echopb.EchoRequest) (*echopb.EchoReply, error) {
	if in.GetMsg() == "fail" {
		return nil, errors.New("fail: idl")
	}
	if h, ok := tri.FromIncomingContext(ctx); ok {
		// Lower-cased names, so no Header.Get (it canonicalises).
		if v := first(h[dubbogo.ReqAttachment]); v != "" {
			tri.AppendToOutgoingContext(ctx, dubbogo.RespAttachment, "resp-"+v)
		}
	}
	return &echopb.EchoReply{Msg: in.GetMsg()}, nil
}

// idlInfo is what protoc-gen-go-triple would generate for echo.proto.
var idlInfo = server.ServiceInfo{
	InterfaceName: IDLInterface,
	ServiceType:   (*IDLService)(nil),
	Methods: []server.MethodInfo{{
		Name:        "Echo",
		Type:        constant.CallUnary,
		ReqInitFunc: func() any { return new(echopb.EchoRequest) },
		MethodFunc: func(ctx context.Context, args []any, handler any) (any, error) {
			res, err := handler.(*IDLService).Echo(ctx, args[0].(*echopb.EchoRequest))
			if err != nil {
				return nil, err
			}
			return tri.NewResponse(res), nil
		},
	}},
}

func provide(addr string) error {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port <= 0 || host == "" {
		return fmt.Errorf("-addr %q: want host:port", addr)
	}
	// dubbo-go binds in a goroutine and only logs a failure: find out first.
	probe, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	probe.Close()
	srv, err := server.NewServer(
		server.WithServerProtocol(protocol.WithTriple(), protocol.WithIp(host), protocol.WithPort(port)),
		server.SetServerTLS(nil),
		server.SetServerShutdown(graceful_shutdown.NewOptions(graceful_shutdown.WithoutInternalSignal()).Shutdown),
	)
	if err != nil {
		return err
	}
	nonIDL, idl := &NonIDLService{}, &IDLService{}
	if err := srv.RegisterService(nonIDL, server.WithNotRegister(), server.WithSerialization(constant.Hessian2Serialization)); err != nil {
		return err
	}
	if err := srv.Register(idl, &idlInfo, server.WithNotRegister()); err != nil {
		return err
	}
	// Export in place of Serve (which ends in select{} and exports the
	// metadata service); the non-IDL service first (see the package doc).
	for _, ref := range []string{nonIDL.Reference(), idl.Reference()} {
		so := srv.GetServiceOptions(ref)
		if so == nil {
			return fmt.Errorf("service %s not registered", ref)
		}
		if err := so.Export(); err != nil {
			return fmt.Errorf("export %s: %w", ref, err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the Triple server did not listen on %s: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	fmt.Printf("listening %s\n", addr)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	return nil
}

// result is what call prints.
type result struct {
	Echo string `json:"echo"`
	// EchoAttachments are Echo's reply trailers, from
	// tri.FromIncomingContext (names lower-case, first values).
	EchoAttachments map[string]string `json:"echo_attachments"`
	User            *dubbogo.User     `json:"user,omitempty"`
	FailError       string            `json:"fail_error,omitempty"`
}

func call(addr, kind, msg, att string, timeout time.Duration) error {
	cli, err := client.NewClient(
		client.WithClientProtocolTriple(),
		client.WithClientClusterFailFast(),
		client.WithClientRetries(0),
		client.WithClientRequestTimeout(timeout),
		client.WithClientNoCheck(),
		client.SetClientTLS(nil),
		client.WithClientShutdown(graceful_shutdown.WithoutInternalSignal()),
	)
	if err != nil {
		return err
	}
	url := "tri://" + addr
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var res result
	// The reply's trailers land in the ctx that carried outgoing headers.
	echoCtx := tri.AppendToOutgoingContext(ctx, dubbogo.ReqAttachment, att)
	switch kind {
	case "idl":
		conn, err := cli.DialWithInfo(IDLInterface, &client.ClientInfo{InterfaceName: IDLInterface, MethodNames: []string{"Echo"}},
			client.WithURL(url))
		if err != nil {
			return err
		}
		out := new(echopb.EchoReply)
		if err := conn.CallUnary(echoCtx, []any{&echopb.EchoRequest{Msg: msg}}, out, "Echo"); err != nil {
			return fmt.Errorf("Echo: %w", err)
		}
		res.Echo = out.GetMsg()
		err = conn.CallUnary(ctx, []any{&echopb.EchoRequest{Msg: "fail"}}, new(echopb.EchoReply), "Echo")
		if err == nil {
			return errors.New(`Echo("fail"): no error`)
		}
		res.FailError = err.Error()
	case "nonidl":
		conn, err := cli.DialWithInfo(dubbogo.Interface,
			&client.ClientInfo{InterfaceName: dubbogo.Interface, MethodNames: []string{"Echo", "GetUser", "Fail"}},
			client.WithURL(url), client.WithSerialization(constant.Hessian2Serialization))
		if err != nil {
			return err
		}
		if err := conn.CallUnary(echoCtx, []any{msg}, &res.Echo, "Echo"); err != nil {
			return fmt.Errorf("Echo: %w", err)
		}
		res.User = new(dubbogo.User)
		if err := conn.CallUnary(ctx, []any{int64(7)}, res.User, "GetUser"); err != nil {
			return fmt.Errorf("GetUser: %w", err)
		}
		// A void method still needs a reply pointer: CallUnary takes the
		// last of its arguments and reply as the reply.
		var none any
		err = conn.CallUnary(ctx, []any{msg}, &none, "Fail")
		if err == nil {
			return errors.New("Fail: no error")
		}
		res.FailError = err.Error()
	default:
		return fmt.Errorf("unknown -kind %q (want idl or nonidl)", kind)
	}
	if h, ok := tri.FromIncomingContext(echoCtx); ok {
		res.EchoAttachments = map[string]string{}
		for k, v := range h {
			if len(v) > 0 {
				res.EchoAttachments[k] = v[0]
			}
		}
	}
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	fmt.Println(string(b))
	return nil
}
