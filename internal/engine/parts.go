package engine

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/weftrpc/weft/cluster"
	"github.com/weftrpc/weft/config"
	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/registry"
)

// A discovering reference is a cluster of clusters when it spans several
// groups or several registries, as in Dubbo: Java's RegistryProtocol joins
// a reference whose group is "*" or a list with the mergeable cluster over
// one cluster per group, and ReferenceConfig one subscribed in several
// registries with the zone-aware cluster over one cluster per registry
// (each of those, in turn, per group when the group asks for several).

// multiGroup reports whether a reference's group asks for several groups.
func multiGroup(group string) bool { return group == "*" || strings.Contains(group, ",") }

// subscribing are the registries a discovering reference looks providers
// up in, sorted.
func (rt *Runtime) subscribing() []string {
	var ids []string
	for _, id := range sortedKeys(rt.registryURLs) {
		if rt.registryURLs[id].ParamBool(registry.KeySubscribe, true) {
			ids = append(ids, id)
		}
	}
	return ids
}

// groupClusters are the cluster that merges a reference's groups (the
// mergeable cluster) and the cluster of each group: the reference's, or
// the default when the reference names mergeable itself.
func (rt *Runtime) groupClusters(u *kernel.URL, cl extension.Cluster) (outer, inner extension.Cluster, err error) {
	if outer, err = rt.clusters.Get(cluster.Mergeable); err != nil {
		return nil, nil, err
	}
	if u.Param(kernel.KeyCluster) == cluster.Mergeable {
		inner, err = rt.clusters.Default()
		return outer, inner, err
	}
	return outer, cl, nil
}

// discovery is a discovering reference's directory, which the registries
// feed, and the cluster that joins it: a RegistryDirectory and the
// reference's cluster, or, for several groups or registries, a directory
// of parts and the cluster over them.
func (rt *Runtime) discovery(ctx context.Context, r *reference, cl extension.Cluster) (cluster.PartDirectory, extension.Cluster, error) {
	ids := rt.subscribing()
	if len(ids) < 2 {
		return rt.groups(ctx, r, r.url, cl)
	}
	zoneAware, err := rt.clusters.Get(cluster.ZoneAware)
	if err != nil {
		return nil, nil, err
	}
	rd, err := cluster.NewRegistriesDirectory(r.url, rt.log, ids, func(id string) (cluster.Part, error) {
		d, c, err := rt.groups(ctx, r, partURL(r.url), cl)
		if err != nil {
			return cluster.Part{}, err
		}
		iv, err := c.Join(d)
		if err != nil {
			d.Destroy()
			return cluster.Part{}, err
		}
		return cluster.Part{Dir: d, Invoker: cluster.Relabeled(iv, registryPartURL(r.url, id, rt.cfg.Registries[id]))}, nil
	})
	return rd, zoneAware, err
}

// groups is the directory of the providers one registry (or the union of
// them) lists for r, with the consumer URL u, and the cluster that joins it.
func (rt *Runtime) groups(ctx context.Context, r *reference, u *kernel.URL, cl extension.Cluster) (cluster.PartDirectory, extension.Cluster, error) {
	if !multiGroup(r.url.Param(kernel.KeyGroup)) {
		return rt.layer.Directory(ctx, u, r.routers, rt.referOne), cl, nil
	}
	outer, inner, err := rt.groupClusters(r.url, cl)
	if err != nil {
		return nil, nil, err
	}
	return cluster.NewGroupDirectory(u, rt.log, func(group string) (cluster.Part, error) {
		rd := rt.layer.Directory(ctx, partURL(u).WithParam(kernel.KeyGroup, group), r.routers, rt.referOne)
		iv, err := inner.Join(rd)
		if err != nil {
			rd.Destroy()
			return cluster.Part{}, err
		}
		return cluster.Part{Dir: rd, Invoker: iv}, nil
	}), outer, nil
}

// partURL is the consumer URL of a part: the reference's without `mock`,
// which the reference's own cluster applies once for the whole call.
func partURL(u *kernel.URL) *kernel.URL {
	var mocks []string
	u.RangeParams(func(k, _ string) bool {
		if k == cluster.KeyMock || strings.HasSuffix(k, "."+cluster.KeyMock) {
			mocks = append(mocks, k)
		}
		return true
	})
	if len(mocks) == 0 {
		return u
	}
	return u.WithoutParams(mocks...)
}

// registryPartURL is the URL a registry's part answers to the zone-aware
// cluster: which registry, its zone and preference, and its weight (no
// timestamp: no warm-up, as Java weighs registries).
func registryPartURL(u *kernel.URL, id string, rc config.Registry) *kernel.URL {
	p := map[string]string{cluster.KeyRegistryID: id, kernel.KeyWeight: strconv.Itoa(first(rc.Weight, cluster.DefaultWeight))}
	set(p, cluster.KeyRegistryZoneGo, rc.Zone)
	if rc.Preferred {
		p[cluster.KeyRegistryPreferred] = "true"
	}
	return partURL(u).WithoutParams(kernel.KeyTimestamp).WithParams(p)
}

// checkMerger checks a reference's `merger` and its methods' against the
// built-in mergers and the App's (extension.Merger by name).
func (rt *Runtime) checkMerger(path string, rc config.Reference) []error {
	specs := map[string]string{path + ".merger": rc.Merger}
	for m, mc := range rc.Methods {
		specs[path+".methods."+m+".merger"] = mc.Merger
	}
	var mergers cluster.Mergers
	if rt.mergers != nil {
		mergers = rt.mergers
	}
	var errs []error
	for _, at := range sortedKeys(specs) {
		if err := cluster.CheckMerger(specs[at], mergers); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", at, err))
		}
	}
	if rc.URL != "" && multiGroup(rc.Group) {
		errs = append(errs, fmt.Errorf("%s.group: %q asks for several groups, which only providers from registries have (each says its group); a url: reference calls the providers it names: give one group, or drop url: for a registry",
			path, rc.Group))
	}
	return errs
}
