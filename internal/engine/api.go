package engine

import (
	"context"
	"fmt"

	"github.com/weftrpc/weft/config"
	"github.com/weftrpc/weft/internal/observe"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/qos"
)

// Start exports, registers and refers everything, as fx starts the App.
func (rt *Runtime) Start(ctx context.Context) error { return rt.start(ctx) }

// Stop unregisters, unexports and unrefers everything.
func (rt *Runtime) Stop(ctx context.Context) error { return rt.stop(ctx) }

// Config is the config the App runs with now (a config center's change
// replaces it).
func (rt *Runtime) Config() *config.Config {
	rt.applyMu.Lock()
	defer rt.applyMu.Unlock()
	return rt.cfg
}

// Observer is where the App counts its life events for metrics.
func (rt *Runtime) Observer() *observe.Observer { return rt.obs }

// QoS is the App as the QoS server sees it.
func (rt *Runtime) QoS() qos.App { return qosApp{rt} }

// SetQoSServer records the App's QoS server (nil: none), for QoSServer.
func (rt *Runtime) SetQoSServer(s *qos.Server) *qos.Server { return rt.life.srv.Swap(s) }

// QoSServer is the App's QoS server while it listens, else nil.
func (rt *Runtime) QoSServer() *qos.Server { return rt.life.srv.Load() }

// Reference returns the invoker of a started reference, for generic calls:
//
//	res, err := inv.Invoke(ctx, kernel.NewInvocation("sayHello", "world"))
func (rt *Runtime) Reference(id string) (kernel.Invoker, error) {
	r, ok := rt.refs[id]
	if !ok {
		return nil, fmt.Errorf("weft: no reference %q in config", id)
	}
	iv, err := r.current()
	if err != nil || rt.cc == nil {
		return iv, err
	}
	// A config center may refer the reference again: hand out a handle
	// that always calls the current invoker.
	return refHandle{r}, nil
}

// refHandle is a reference's invoker as App.Reference gives it out when the
// invoker may be replaced. The App owns the invokers: Destroy does nothing.
type refHandle struct{ r *reference }

func (h refHandle) Invoke(ctx context.Context, inv *kernel.Invocation) (kernel.Result, error) {
	iv, err := h.r.current()
	if err != nil {
		return kernel.Result{}, err
	}
	return iv.Invoke(ctx, inv)
}

func (h refHandle) URL() *kernel.URL {
	if iv, err := h.r.current(); err == nil {
		return iv.URL()
	}
	return nil
}

func (h refHandle) IsAvailable() bool {
	iv, err := h.r.current()
	return err == nil && iv.IsAvailable()
}

func (h refHandle) Destroy() {}
