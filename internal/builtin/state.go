package builtin

import (
	"log/slog"

	"github.com/weftrpc/weft/cluster"
	"github.com/weftrpc/weft/plugins/filter/adaptivesvc"
	"github.com/weftrpc/weft/plugins/filter/circuitbreaker"
	"github.com/weftrpc/weft/plugins/filter/metrics"
)

// State is what the built-in extensions of one App keep that more than one
// part reads: the circuit breakers and adaptive limiters (their filters,
// read by the metrics), and the providers' load reports (written by the
// adaptiveLoadBalance filter, read by the adaptive and p2c balancers).
type State struct {
	Breakers *circuitbreaker.Filter
	Limiters *adaptivesvc.Filter
	Loads    *cluster.AdaptiveMetrics
}

// NewState returns an App's State, empty; log hears of unusable settings.
func NewState(log *slog.Logger) *State {
	return &State{Breakers: circuitbreaker.New(log), Limiters: adaptivesvc.New(log), Loads: cluster.NewAdaptiveMetrics()}
}

// Sources are the metrics' readers of s.
func (s *State) Sources() metrics.Sources {
	return metrics.Sources{
		CircuitBreakers: func() metrics.CircuitBreakers {
			opened, closed, rejected, open := s.Breakers.Counts()
			return metrics.CircuitBreakers{Opened: opened, Closed: closed, Rejected: rejected, Open: open}
		},
		Limiters: func() metrics.Limiters {
			out := metrics.Limiters{Shed: s.Limiters.Shed()}
			s.Limiters.Limits(func(service, method string, limit, inflight int64) {
				out.Methods = append(out.Methods, metrics.LimiterMethod{Service: service, Method: method, Limit: limit, Inflight: inflight})
			})
			return out
		},
	}
}
