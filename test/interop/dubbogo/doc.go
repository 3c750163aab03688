// Package dubbogo runs a real dubbo-go v3.3.1 provider and consumer in-process,
// speaking the classic "dubbo" protocol (not triple) with hessian2
// serialization, by direct URL and without a registry. Interop tests use it as
// the reference peer for weft, and cmd/dubbogo-echo uses it for benchmarks.
//
// The service is org.weft.bench.EchoService (group and version empty):
//
//	String echo(String)
//	org.weft.bench.User getUser(long)
//	org.weft.bench.User echoUser(org.weft.bench.User)
//	void fail(String)
//
// # How dubbo-go is driven, and its pitfalls (v3.3.1)
//
// Provider: server.NewServer with WithServerProtocol(protocol.WithDubbo(),
// protocol.WithIp(host), protocol.WithPort(port)), SetServerTLS(nil) and a
// shutdown config without the internal signal handler; then Register and, in
// place of Server.Serve, ServiceOptions.Export. Serve is not used because it
// ends in select{} (a goroutine parked forever, no way to stop it) and also
// exports the metadata service, which listens on all interfaces unless
// dubbo.WithRemoteMetadata() is set. Export opens the getty listener on
// exactly host:port, so the provider binds 127.0.0.1 only.
//
//   - SetServerTLS(nil) / SetClientTLS(nil): the default TLS config is a
//     non-nil empty struct, which makes getty turn SSL on with no certificates;
//     its listener is then nil and Export panics. The flag lives in getty's
//     package-global server config, so once set it stays set for the process.
//   - graceful_shutdown.Init runs once per process, from whichever of
//     server.NewServer or client.NewClient comes first. By default it installs a
//     SIGINT/SIGTERM handler that ends in os.Exit(0); this package always passes
//     WithoutInternalSignal.
//   - A port already in use makes getty panic inside DubboProtocol.openServer
//     while it holds the protocol's server lock, which wedges the dubbo protocol
//     for the rest of the process. StartProvider therefore probes the port with
//     net.Listen first.
//   - dubbo-go keeps services in process-global maps (common.ServiceMap and the
//     dubbo protocol's exporter map, keyed by interface:group:version), so only
//     one EchoService provider can run in a process at a time; StartProvider
//     returns an error for a second one.
//   - Server.Stop does not exist, and DubboProtocol.Destroy would also destroy
//     every dubbo-go consumer in the process. stop() unexports the service,
//     then takes this provider's getty server out of DubboProtocol's private
//     serverMap (reflection; falls back to Destroy if the layout ever
//     differs), closes its listener, closes the connections it had accepted
//     (getty's own Stop leaves them open) and closes its goroutine pool
//     (never closed by dubbo-go: one parked goroutine per request that once
//     ran concurrently). See internals.go.
//   - dubbo-go serves each method under both first-letter cases (Echo and echo).
//   - getty's default max-msg-len is 1024000 bytes, below a 1 MiB string; this
//     package raises it to MaxMsgLen (8 MiB) process-wide on both sides.
//
// Consumer: client.NewClient with WithClientProtocolDubbo, hessian2
// serialization, the failfast cluster and zero retries (the default failover
// cluster retries dubbo-protocol business errors twice, since it only
// recognises triple's biz-error code, so a failing method would run three
// times), then Dial(interface, WithURL(url)) and Connection.CallUnary.
// CallUnary waits forever unless given WithCallRequestTimeout, so every call
// gets one (3s by default, shortened to the context's deadline). dubbo-go
// shares one connection per address among all consumers of the process.
// Refer panics when it cannot connect (after about 6s: two 3s connect
// attempts), and the failfast cluster panics when its only invoker has lost
// its connection; both are turned into errors. Connection has no Close: see
// Client.Close.
//
// # Data races: no -race here
//
// dubbo-go v3.3.1 and getty v1.4.10 race on their own (found by -race in
// this package's tests): getty copies its connection struct by value on every
// close while its workers update atomic counters in it, and clears a field
// its writers read; dubbo-go's RpcClientHandler.OnMessage writes a shared
// field from concurrent response handlers; dubbo-go closes a consumer
// connection from two goroutines at once. These are the peer's bugs, not
// weft's, and patching the peer would no longer test against the real one,
// so this module's tests run without -race (see .ci/run). weft's own code is
// race-tested in the main module. Client.Close still avoids dubbo-go's
// double-close path (closeSharedConnection).
//
// # What stays after stop and Close
//
// Goroutines that dubbo-go and getty start once per process and never stop:
// gost's timer wheel and its unbounded channel, the access-log filter's
// writer, and the workers of dubbo-go's process-wide consumer pool (up to its
// size, 200). Per provider or Client nothing is left once
// stop and Close return, except one dubbo-go ExchangeClient per address ever
// dialled (reused by the next Client of that address) and the retired
// invoker entries in the dubbo protocol's list. Process-global settings stay
// as set: getty's server and client configs, graceful_shutdown's one-time
// init, hessian's POJO registry, the extension registry (our filter).
//
// # Attachments
//
// Both directions work on the dubbo protocol. The provider reads request
// attachments from ctx.Value(constant.AttachmentKey), a map[string]any. dubbo-go
// has no API for response attachments, but its ProxyInvoker returns that same
// map as the result's attachments, so a provider sets a response attachment by
// writing into it: echo sets "x-resp" = "resp-"+x-req. The consequence is that
// every request attachment (path, interface, timeout, the dubbo version, and
// the ones the caller sent) is echoed back in the response too. Responses carry
// attachments only when the request's "dubbo" version attachment is >= 2.0.2
// (dubbo-go sends 2.0.2).
//
// Wire details seen from this provider (TestRawClient pins them): a request
// from the dubbo-go consumer carries the attachments path, interface, version
// (empty), timeout (ms, as a string) and retries; the provider adds
// local-addr and remote-addr (strings) before the method runs, so they come
// back too. A success is RESPONSE_VALUE_WITH_ATTACHMENTS (4) or
// RESPONSE_NULL_VALUE_WITH_ATTACHMENTS (5) for void; a business error is
// RESPONSE_WITH_EXCEPTION_WITH_ATTACHMENTS (3) with a java.lang.Throwable
// whose detailMessage is the Go error's text, under response status 20 (OK).
// dubbo-go appends one hessian null ('N') after every response body.
//
// CallUnary neither sends ctx attachments nor exposes the response's, so the
// Client installs a consumer filter (registered with extension.SetFilter as
// "weft-interop-attachments") that copies a per-call request map into the
// invocation and captures the response attachments: see Client.Invoke.
package dubbogo
