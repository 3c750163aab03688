package extension

import (
	"context"

	"github.com/weftrpc/weft/kernel"
)

// DefaultProtocol is the protocol used when none is configured.
const DefaultProtocol = "dubbo"

// Protocol exports local invokers to peers and refers remote ones (Dubbo's
// Protocol). Filter chains are built around invokers by the caller, not by
// the protocol.
type Protocol interface {
	// Export makes invoker callable by peers, keyed by its URL's service key.
	Export(ctx context.Context, invoker kernel.Invoker) (Exporter, error)
	// Refer returns an invoker that calls the provider url describes.
	Refer(ctx context.Context, url *kernel.URL) (kernel.Invoker, error)
	// Destroy unexports everything and closes every connection.
	Destroy()
}

// BoundExporter is an Exporter that knows the address its server bound:
// an invoker exported on port 0 learns its real port from it, for the
// registries.
type BoundExporter interface {
	Exporter
	BoundAddr() string
}

// Exporter is the handle of an exported service.
type Exporter interface {
	Invoker() kernel.Invoker
	// Unexport stops serving the invoker; calls already running finish.
	Unexport()
}
