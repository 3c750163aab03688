package weft

import (
	"log/slog"

	"go.uber.org/fx"

	"github.com/weftrpc/weft/cluster"
	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/plugins/filter/accesslog"
	"github.com/weftrpc/weft/plugins/filter/activelimit"
	ctxfilter "github.com/weftrpc/weft/plugins/filter/context"
	"github.com/weftrpc/weft/plugins/filter/echo"
	"github.com/weftrpc/weft/plugins/filter/executelimit"
	"github.com/weftrpc/weft/plugins/filter/generic"
	"github.com/weftrpc/weft/plugins/filter/timeout"
	"github.com/weftrpc/weft/plugins/protocol/dubbo"
	"github.com/weftrpc/weft/plugins/protocol/injvm"
)

// Extension is one named implementation of the extension point T, as an App
// receives it: a side-effect-free constructor plus, for activatable points
// (filters), when it activates by itself.
type Extension[T any] struct {
	Name     string
	New      kernel.Factory[T]
	Activate *kernel.Activate
}

// The fx value groups that collect each point's extensions. A plugin is an
// fx.Option that provides an Extension[T] into its group.
const (
	groupProtocol    = `group:"weft.protocol"`
	groupFilter      = `group:"weft.filter"`
	groupCluster     = `group:"weft.cluster"`
	groupLoadBalance = `group:"weft.loadbalance"`
	groupRouter      = `group:"weft.router"`
)

func groupOf[T any]() string {
	var zero *T
	switch any(zero).(type) {
	case *extension.Protocol:
		return groupProtocol
	case *extension.Filter:
		return groupFilter
	case *extension.Cluster:
		return groupCluster
	case *extension.LoadBalance:
		return groupLoadBalance
	case *extension.RouterFactory:
		return groupRouter
	}
	panic("weft: no extension group for this type")
}

// Plugin turns ctor, a function (taking any of the App's components: a
// *slog.Logger, the *kernel.StatusStore, another point's Loader) that
// returns an Extension[T], into an fx option of an App.
func Plugin[T any](ctor any) fx.Option {
	return fx.Provide(fx.Annotate(ctor, fx.ResultTags(groupOf[T]())))
}

func value[T any](v T) kernel.Factory[T] { return func() (T, error) { return v, nil } }

// builtins are the plugins every App has; options may add more.
func builtins() fx.Option {
	return fx.Options(
		Plugin[extension.Protocol](func() Extension[extension.Protocol] {
			return Extension[extension.Protocol]{Name: injvm.Name, New: func() (extension.Protocol, error) { return injvm.New(), nil }}
		}),

		Plugin[extension.Protocol](func(log *slog.Logger) Extension[extension.Protocol] {
			return Extension[extension.Protocol]{Name: dubbo.Name, New: func() (extension.Protocol, error) { return dubbo.New(log), nil }}
		}),

		Plugin[extension.Filter](func() Extension[extension.Filter] {
			return Extension[extension.Filter]{Name: generic.Name, New: value(generic.New()), Activate: generic.Activation()}
		}),
		Plugin[extension.Filter](func() Extension[extension.Filter] {
			return Extension[extension.Filter]{Name: echo.Name, New: value(echo.New()), Activate: echo.Activation()}
		}),
		Plugin[extension.Filter](func() Extension[extension.Filter] {
			return Extension[extension.Filter]{Name: ctxfilter.Name, New: value(ctxfilter.New()), Activate: ctxfilter.Activation()}
		}),
		Plugin[extension.Filter](func() Extension[extension.Filter] {
			return Extension[extension.Filter]{Name: ctxfilter.ConsumerName, New: value(ctxfilter.NewConsumer()), Activate: ctxfilter.ConsumerActivation()}
		}),
		Plugin[extension.Filter](func(log *slog.Logger) Extension[extension.Filter] {
			return Extension[extension.Filter]{Name: timeout.Name, New: value(timeout.New(log)), Activate: timeout.Activation()}
		}),
		Plugin[extension.Filter](func(log *slog.Logger) Extension[extension.Filter] {
			return Extension[extension.Filter]{Name: accesslog.Name, Activate: accesslog.Activation(),
				New: func() (extension.Filter, error) { return accesslog.New(log), nil }}
		}),
		Plugin[extension.Filter](func(st *kernel.StatusStore) Extension[extension.Filter] {
			return Extension[extension.Filter]{Name: executelimit.Name, New: value(executelimit.New(st)), Activate: executelimit.Activation()}
		}),
		Plugin[extension.Filter](func(st *kernel.StatusStore) Extension[extension.Filter] {
			return Extension[extension.Filter]{Name: activelimit.Name, New: value(activelimit.New(st)), Activate: activelimit.Activation()}
		}),

		Plugin[extension.RouterFactory](func() Extension[extension.RouterFactory] {
			return Extension[extension.RouterFactory]{Name: cluster.ConditionRouterName, New: value[extension.RouterFactory](cluster.ConditionRouterFactory{})}
		}),
		Plugin[extension.RouterFactory](func() Extension[extension.RouterFactory] {
			return Extension[extension.RouterFactory]{Name: cluster.TagRouterName, New: value[extension.RouterFactory](cluster.TagRouterFactory{})}
		}),

		clusterPlugin(cluster.Failover, cluster.NewFailover),
		clusterPlugin(cluster.Failfast, cluster.NewFailfast),
		clusterPlugin(cluster.Failsafe, cluster.NewFailsafe),
		clusterPlugin(cluster.Failback, cluster.NewFailback),
		clusterPlugin(cluster.Forking, cluster.NewForking),
		clusterPlugin(cluster.Broadcast, cluster.NewBroadcast),
		clusterPlugin(cluster.Available, cluster.NewAvailable),
		Plugin[extension.LoadBalance](func() Extension[extension.LoadBalance] {
			return Extension[extension.LoadBalance]{Name: cluster.Random, New: value(cluster.NewRandom())}
		}),
		Plugin[extension.LoadBalance](func() Extension[extension.LoadBalance] {
			return Extension[extension.LoadBalance]{Name: cluster.RoundRobin, New: func() (extension.LoadBalance, error) { return cluster.NewRoundRobin(), nil }}
		}),
		Plugin[extension.LoadBalance](func() Extension[extension.LoadBalance] {
			return Extension[extension.LoadBalance]{Name: cluster.ConsistentHash, New: func() (extension.LoadBalance, error) { return cluster.NewConsistentHash(), nil }}
		}),
		Plugin[extension.LoadBalance](func(st *kernel.StatusStore) Extension[extension.LoadBalance] {
			return Extension[extension.LoadBalance]{Name: cluster.LeastActive, New: func() (extension.LoadBalance, error) { return cluster.NewLeastActive(st), nil }}
		}),
		Plugin[extension.LoadBalance](func(st *kernel.StatusStore) Extension[extension.LoadBalance] {
			return Extension[extension.LoadBalance]{Name: cluster.ShortestResponse, New: func() (extension.LoadBalance, error) { return cluster.NewShortestResponse(st), nil }}
		}),
		Plugin[extension.LoadBalance](func(st *kernel.StatusStore) Extension[extension.LoadBalance] {
			return Extension[extension.LoadBalance]{Name: cluster.P2C, New: func() (extension.LoadBalance, error) { return cluster.NewP2C(st), nil }}
		}),
	)
}

func clusterPlugin(name string, ctor func(*kernel.Loader[extension.LoadBalance], *slog.Logger) extension.Cluster) fx.Option {
	return Plugin[extension.Cluster](func(lbs *kernel.Loader[extension.LoadBalance], log *slog.Logger) Extension[extension.Cluster] {
		return Extension[extension.Cluster]{Name: name, New: func() (extension.Cluster, error) { return ctor(lbs, log), nil }}
	})
}

// loaders builds one Loader per point from its group. Each Loader closes its
// instances when the App stops, after everything that uses them.
func loaders() fx.Option {
	return fx.Options(
		loader[extension.Protocol]("protocol", extension.DefaultProtocol),
		loader[extension.Filter]("filter", extension.DefaultFilter),
		loader[extension.Cluster]("cluster", extension.DefaultCluster),
		loader[extension.LoadBalance]("loadbalance", extension.DefaultLoadBalance),
		loader[extension.RouterFactory]("router", extension.DefaultRouter),
	)
}

func loader[T any](point, def string) fx.Option {
	return fx.Provide(fx.Annotate(func(exts []Extension[T], lc fx.Lifecycle) (*kernel.Loader[T], error) {
		l := kernel.NewLoader[T](point, def)
		for _, e := range exts {
			if err := l.Register(e.Name, e.New, e.Activate); err != nil {
				return nil, err
			}
		}
		lc.Append(fx.StopHook(l.Close))
		return l, nil
	}, fx.ParamTags(groupOf[T]())))
}
