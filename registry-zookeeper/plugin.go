package zookeeper

// The integration as a weft.Plugin, kept to this file: the rest of the
// package is a plain extension.RegistryFactory,
// extension.ServiceDiscoveryFactory and extension.DynamicConfigurationFactory
// that know nothing of the App.

import (
	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/extension"
)

// Plugin adds ZooKeeper to an App, as the registry (interface level and,
// through DiscoveryFactory, application level) and the config center
// named "zookeeper", all logging to the App's logger:
//
//	app, err := weft.New(weft.WithPlugins(zookeeper.Plugin()), ...)
//
// weft does not build it in, so that a program that does not use ZooKeeper
// does not link go-zookeeper.
func Plugin() weft.Plugin {
	return weft.NewPlugin(Name,
		weft.Provide(Name, func(h weft.Host) (extension.RegistryFactory, error) { return Factory{Log: h.Log}, nil }, nil),
		weft.Provide(Name, func(h weft.Host) (extension.ServiceDiscoveryFactory, error) { return DiscoveryFactory{Log: h.Log}, nil }, nil),
		weft.Provide(Name, func(h weft.Host) (extension.DynamicConfigurationFactory, error) {
			return ConfigFactory{Log: h.Log}, nil
		}, nil),
	)
}
