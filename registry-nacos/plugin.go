package nacos

// The fx glue of the integration, kept to this file: the rest of the
// package is a plain extension.RegistryFactory and
// extension.DynamicConfigurationFactory that know nothing of the App.

import (
	"log/slog"

	"go.uber.org/fx"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/extension"
)

// Plugin adds Nacos to an App, as the registry, the application-level
// service discovery and the config center named "nacos", all logging to the
// App's logger:
//
//	app, err := weft.New(weft.WithPlugins(nacos.Plugin()), ...)
//
// weft does not build them in, so that a program that does not use Nacos
// does not link nacos-sdk-go (and the Alibaba Cloud modules its init
// touches).
func Plugin() fx.Option {
	return fx.Options(
		weft.Plugin[extension.RegistryFactory](func(log *slog.Logger) weft.Extension[extension.RegistryFactory] {
			return weft.Extension[extension.RegistryFactory]{Name: Name, New: func() (extension.RegistryFactory, error) {
				return Factory{Log: log}, nil
			}}
		}),
		// Application-level discovery on the same server, under the
		// registry's name: the registry layer pairs them by name.
		weft.Plugin[extension.ServiceDiscoveryFactory](func(log *slog.Logger) weft.Extension[extension.ServiceDiscoveryFactory] {
			return weft.Extension[extension.ServiceDiscoveryFactory]{Name: Name, New: func() (extension.ServiceDiscoveryFactory, error) {
				return DiscoveryFactory{Log: log}, nil
			}}
		}),
		weft.Plugin[extension.DynamicConfigurationFactory](func(log *slog.Logger) weft.Extension[extension.DynamicConfigurationFactory] {
			return weft.Extension[extension.DynamicConfigurationFactory]{Name: Name, New: func() (extension.DynamicConfigurationFactory, error) {
				return ConfigFactory{Log: log}, nil
			}}
		}),
	)
}
