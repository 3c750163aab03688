// Package qos is weft's QoS server, Dubbo's operations port: one TCP port
// (22222 by default) that answers both telnet (line commands at Dubbo's
// prompt `dubbo>`) and HTTP (`GET /ls`, `GET /ready`, ...), told apart by the
// first bytes a client sends. Its commands are Dubbo's: help, ls, ps,
// online, offline, ready, live, startup, invoke and quit; `/metrics` serves
// the handler the App supplies.
//
// The package knows nothing of fx, koanf or the App's internals: the App
// hands it an App, the few questions and actions the commands need.
package qos

import (
	"context"
	"errors"
)

// App is what the QoS server asks of the application it serves. Every
// method is called from the server's goroutines, concurrently, while the App
// starts, runs and stops; the probes (Ready, Live, Started) must answer
// without waiting on anything slow (a registry call), since Kubernetes gives
// a probe about a second.
type App interface {
	// Services lists the services the App exports, in a stable order.
	Services() []Service
	// References lists the App's references, in a stable order.
	References() []Reference
	// Ports lists the ports the App listens on (its protocol servers).
	Ports() []Port
	// Online registers again, in every registry, the services that service
	// names ("" or "*": all of them), and returns the service keys it put
	// online. Offline unregisters them without unexporting: consumers stop
	// choosing this provider, calls in flight finish, and it keeps
	// answering those who call it directly. An error wrapping ErrNotFound
	// means nothing matched.
	Online(ctx context.Context, service string) ([]string, error)
	Offline(ctx context.Context, service string) ([]string, error)
	// Ready says whether the App should receive traffic, and why not.
	Ready() (bool, string)
	// Live says whether the App is running (a false asks for a restart).
	Live() (bool, string)
	// Started says whether the App's start has finished.
	Started() (bool, string)
	// Invoke calls method of the service that target names (its id,
	// interface or service key) in this App, as a generic call through
	// the service's filter chain, with the arguments of argsJSON (a JSON
	// array), and returns the result as JSON: Dubbo's QoS invoke.
	Invoke(ctx context.Context, target, method, argsJSON string) (string, error)
}

// ErrNotFound is wrapped by App.Online and App.Offline when no service
// matches; HTTP answers it with 404.
var ErrNotFound = errors.New("no such service")

// Service is one exported service as ls shows it.
type Service struct {
	ID  string // the config's provider.services id
	Key string // group/interface:version, Dubbo's service key
	// Exports are the service's addresses, one per protocol
	// (dubbo://127.0.0.1:20880).
	Exports []string
	// Registries says, per registry id, whether the service is registered
	// there now (false after offline).
	Registries []Registration
	// Filters is the service's effective filter chain, in the order a
	// call meets it ("name (wasm)" for a WASM filter).
	Filters []string
}

// Registration is a service's state in one registry.
type Registration struct {
	Registry   string
	Registered bool
}

// Reference is one reference as ls shows it.
type Reference struct {
	ID  string // the config's consumer.references id
	Key string
	// Discover is true when the providers come from registries, false for
	// a fixed url or an in-process service.
	Discover bool
	// Providers are the addresses of the providers the reference knows now.
	Providers []string
	// Filters is the reference's effective consumer filter chain, in the
	// order a call meets it.
	Filters []string
}

// Port is one listening port as ps shows it.
type Port struct {
	Protocol string
	Addr     string // host:port
}
