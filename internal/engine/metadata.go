package engine

import (
	"context"
	"fmt"
	"strconv"

	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/plugins/serialization/hessian2"
	"github.com/weftrpc/weft/proxy"
	"github.com/weftrpc/weft/registry"
)

// metadataService is Dubbo 3's org.apache.dubbo.metadata.MetadataService
// as a provider in instance mode serves it: consumers that found one of
// its instances ask it for the services of the instance's revision.
// getMetadataInfo is the method Java and dubbo-go consumers call; it
// answers nil for a revision the App no longer has (as Java does), and
// the consumer asks again once it sees the instance's new revision.
type metadataService struct{ layer *registry.Layer }

func (m metadataService) GetMetadataInfo(_ context.Context, revision string) (*registry.MetadataInfo, error) {
	return m.layer.Metadata(revision), nil
}

// registerMetadataTypes makes the MetadataService's answer decode into
// registry.MetadataInfo, whoever sent it (Java, dubbo-go, weft). The
// hessian2 registry is process-wide; registering the same types again is
// harmless.
func registerMetadataTypes() {
	hessian2.RegisterPOJO(&registry.MetadataInfo{})
	hessian2.RegisterPOJO(&registry.ServiceInfo{})
}

// exportMetadataService exports the App's MetadataService on the server of
// its first exported service (its protocol, host and port), group = the
// application, version 1.0.0, as Dubbo does; the instances registered
// after point consumers to it.
func (rt *Runtime) exportMetadataService(ctx context.Context, first *kernel.URL) error {
	app := rt.cfg.Application.Name
	u := kernel.NewURL(first.Protocol, first.Host, first.Port, registry.MetadataServiceName, map[string]string{
		kernel.KeyInterface:   registry.MetadataServiceName,
		kernel.KeyGroup:       app,
		kernel.KeyVersion:     registry.MetadataServiceVersion,
		kernel.KeySide:        kernel.SideProvider,
		kernel.KeyApplication: app,
	})
	inv, err := proxy.NewServiceInvoker(u, metadataService{rt.layer})
	if err != nil {
		return fmt.Errorf("weft: MetadataService: %w", err)
	}
	p, err := rt.protocols.Get(u.Protocol)
	if err != nil {
		return err
	}
	exp, err := p.Export(ctx, inv)
	if err != nil {
		return fmt.Errorf("weft: export the MetadataService (application-level discovery) on %s: %w", u.Address(), err)
	}
	rt.exporters = append(rt.exporters, exp)
	rt.metaURL.Store(u)
	rt.log.Info("weft: exported the MetadataService", "application", app, "protocol", u.Protocol, "address", u.Address())
	return nil
}

// metadataURL is where the App's MetadataService answers; nil before it is
// exported.
func (rt *Runtime) metadataURL() *kernel.URL { return rt.metaURL.Load() }

// metadataCallTimeout bounds one getMetadataInfo call, in milliseconds,
// as dubbo-go's 5 s.
const metadataCallTimeout = 5000

// fetchMetadata calls getMetadataInfo(revision) on the MetadataService at
// u: a provider of another App, found by application-level discovery.
func (rt *Runtime) fetchMetadata(ctx context.Context, u *kernel.URL, rev string) (*registry.MetadataInfo, error) {
	params := map[string]string{kernel.KeyTimeout: strconv.Itoa(metadataCallTimeout), kernel.KeyRetries: "0"}
	if app := rt.cfg.Application.Name; app != "" {
		params[kernel.KeyApplication] = app
	}
	iv, err := rt.referOne(ctx, u.WithParams(params))
	if err != nil {
		return nil, fmt.Errorf("refer the MetadataService at %s: %w", u.Address(), err)
	}
	defer iv.Destroy()
	var stub struct {
		GetMetadataInfo func(context.Context, string) (*registry.MetadataInfo, error)
	}
	if err := proxy.Fill(&stub, func() (kernel.Invoker, error) { return iv, nil }); err != nil {
		return nil, err
	}
	md, err := stub.GetMetadataInfo(ctx, rev)
	if err != nil {
		return nil, fmt.Errorf("getMetadataInfo(%s) at %s: %w", rev, u.Address(), err)
	}
	return md, nil
}
