// Package kernel holds what every other package of weft shares and nothing
// else: the types a call is made of and the machinery that picks plugins by
// name.
//
//   - URL (url.go) is Dubbo's URL: the protocol, address, service path and
//     parameters that configure every extension on a call's path, parsed
//     and written as Java Dubbo writes it.
//   - Invocation, Result and Invoker (invocation.go) are a call, its answer
//     and what answers it (filter chains and clusters are Invokers too);
//     Stream and ClientStream (stream.go) are the streaming calls.
//   - Error and Code (errors.go) are errors that keep their code across
//     processes (Dubbo status, gRPC status and weft's codes map onto each
//     other there), and say whether another provider could answer.
//   - Loader (loader.go) is Dubbo's ExtensionLoader: one per extension point
//     and App, named extensions created on first use, a default name,
//     wrappers, and @Activate activation by group and URL keys, in a
//     deterministic order; an unknown name fails with the names it knows.
//   - StatusStore (status.go) counts calls in flight per service and
//     method (Dubbo's RpcStatus), for the actives and executes limits and
//     the load balancers that read them.
//   - WithDeadline and CallContext (deadline.go) carry a call's time left
//     across processes.
//   - view is the one bounded walker of values that crossed the wire:
//     anything that prints, sizes or compares a decoded value goes through
//     it, so that a value containing itself or nested a million deep costs
//     a bounded amount.
//
// kernel imports nothing of weft; extension/ declares the extension points
// on its types, and everything else builds on both (test/arch_test.go checks
// the layering).
package kernel
