package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"

	"github.com/go-zookeeper/zk"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// catalogMax bounds a listing: it is for people and tools, and a root with
// more services than this is cut rather than walked for minutes.
const catalogMax = 10000

var _ extension.Catalog = (*Registry)(nil)

// Providers lists the providers of every service under the registry's
// root, by service key, each list sorted by URL (Dubbo's lookup over every
// interface). Names that are not Dubbo URLs are skipped; a service whose
// providers cannot be read is named in the error, the others still listed.
func (r *Registry) Providers(ctx context.Context) (map[string][]*kernel.URL, error) {
	out := map[string][]*kernel.URL{}
	services, _, err := r.c.conn.Children(r.root)
	if errors.Is(err, zk.ErrNoNode) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("zookeeper: list %s at %s: %w", r.root, r.c.where, err)
	}
	sort.Strings(services)
	var errs []error
	if len(services) > catalogMax {
		errs = append(errs, fmt.Errorf("zookeeper: %s holds %d services; listing the first %d", r.root, len(services), catalogMax))
		services = services[:catalogMax]
	}
	for _, svc := range services {
		if err := ctx.Err(); err != nil {
			return out, errors.Join(append(errs, err)...)
		}
		if len(svc) > maxNodeName {
			continue
		}
		if _, err := url.QueryUnescape(svc); err != nil {
			continue // not an encoded interface name: not Dubbo's
		}
		path := r.root + "/" + svc + "/" + CategoryProviders
		children, _, err := r.c.conn.Children(path)
		if errors.Is(err, zk.ErrNoNode) {
			continue // consumers only, or a config node
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("zookeeper: list %s at %s: %w", path, r.c.where, err))
			continue
		}
		for _, name := range children {
			u, err := ParseNode(name)
			if err != nil || u.Protocol == protocolEmpty {
				continue
			}
			out[u.ServiceKey()] = append(out[u.ServiceKey()], u)
		}
	}
	for _, urls := range out {
		sort.Slice(urls, func(i, j int) bool { return urls[i].String() < urls[j].String() })
	}
	return out, errors.Join(errs...)
}
