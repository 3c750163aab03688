package nacos

// The integration as a weft.Plugin, kept to this file: the rest of the
// package is a plain extension.RegistryFactory and
// extension.DynamicConfigurationFactory that know nothing of the App.

import (
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
func Plugin() weft.Plugin {
	return weft.NewPlugin(Name,
		weft.Provide(Name, func(h weft.Host) (extension.RegistryFactory, error) { return Factory{Log: h.Log}, nil }, nil),
		// Application-level discovery on the same server, under the
		// registry's name: the registry layer pairs them by name.
		weft.Provide(Name, func(h weft.Host) (extension.ServiceDiscoveryFactory, error) { return DiscoveryFactory{Log: h.Log}, nil }, nil),
		weft.Provide(Name, func(h weft.Host) (extension.DynamicConfigurationFactory, error) {
			return ConfigFactory{Log: h.Log}, nil
		}, nil),
	)
}
