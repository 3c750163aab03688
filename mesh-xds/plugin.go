// Package xds makes weft a proxyless client of a service mesh's control
// plane: an xDS client (Istio's protocol, as grpc-go's proxyless client
// speaks it) that serves as a registry named "xds". A reference's
// providers are the endpoints of the clusters its listener's routes name.
//
// It is a module of its own, so that a program that does not join a mesh
// does not link gRPC and Envoy's API types.
package xds

// The integration as a weft.Plugin, kept to this file: the rest of the
// package is a plain extension.RegistryFactory that knows nothing of the
// App.

import (
	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/extension"
)

// Plugin adds the xDS registry to an App, logging to the App's logger:
//
//	app, err := weft.New(weft.WithPlugins(xds.Plugin()), ...)
//
// with `registries: {mesh: {address: "xds://istiod:15010"}}` in config.
func Plugin() weft.Plugin {
	return weft.NewPlugin("mesh-xds",
		weft.Provide(Name, func(h weft.Host) (extension.RegistryFactory, error) { return Factory{Log: h.Log}, nil }, nil),
		// The mTLS of the clusters that ask for it (extension.KeySecurity
		// on their providers' URLs): one per App, closed with it.
		weft.Provide(Name, func(h weft.Host) (extension.ClientSecurity, error) { return NewSecurity(h.Log), nil }, nil),
	)
}
