package cluster

import (
	"context"
	"log/slog"
	"strings"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// ZoneAware is Dubbo's ZoneAwareCluster, the cluster of a reference
// subscribed in several registries: each registry is a cluster of its own
// providers (see RegistriesDirectory), and a call goes to one registry,
// chosen in Java's order:
//
//  1. the first available registry with `preferred: true`;
//  2. with a zone for the call, the first available registry of that zone;
//     none, and the call forces its zone: it fails, saying so;
//  3. the reference's load balancer over the registries, by each
//     registry's `weight` (default 100, no warm-up), when it chose an
//     available one;
//  4. the first available registry.
//
// The call's zone is its attachment registry_zone (Java's) or
// registry.zone (dubbo-go's), else the reference's `registry_zone` or
// `registry.zone` parameter (weft's stand-in for Java's ZoneDetector: the
// consumer's own zone, set once); registry_zone_force and
// registry.zone.force, "true", force it the same ways. Once a registry is
// chosen its cluster does the rest (failover within that registry). Unlike
// Java, a registry whose cluster could not get the call run (no provider
// available, the connection gone, the provider stopping) passes it on to
// the next available registry, unless the zone is forced: the call does
// not fail while another zone can take it.
const (
	ZoneAware = "zone-aware"

	KeyRegistryZone        = "registry_zone"
	KeyRegistryZoneForce   = "registry_zone_force"
	KeyRegistryZoneGo      = "registry.zone"
	KeyRegistryZoneForceGo = "registry.zone.force"

	// KeyRegistryID, KeyRegistryPreferred and (as on a call)
	// KeyRegistryZoneGo are on a registry's part, with `weight`: which
	// registry it stands for, as dubbo-go's invoker URLs say it.
	KeyRegistryID        = "registry"
	KeyRegistryPreferred = "registry.preferred"
)

// NewZoneAware returns the zone-aware cluster.
func NewZoneAware(lbs *kernel.Loader[extension.LoadBalance], log *slog.Logger) extension.Cluster {
	return &strategy{lbs: lbs, log: log, do: zoneAware}
}

func zoneAware(ctx context.Context, c *clusterInvoker, inv *kernel.Invocation) (kernel.Result, error) {
	registries, err := c.list(ctx, inv)
	if err != nil {
		return kernel.Result{}, err
	}
	zone, force := callZone(c.dir.URL(), inv)
	iv, err := chooseRegistry(c, registries, inv, zone, force)
	if err != nil {
		return kernel.Result{}, err
	}
	res, err := iv.Invoke(ctx, inv)
	tried := []kernel.Invoker{iv}
	for !force && notRun(err) && ctx.Err() == nil {
		// The registry's providers went, or were all routed away, since it
		// was chosen: its list is kept through an empty push (empty
		// protection), so a zone whose providers stop is left by the calls
		// that find it gone. Another registry may take the call.
		next := nextAvailable(registries, tried)
		if next == nil {
			break
		}
		if ok, _ := c.budget.retry(); !ok {
			break
		}
		tried = append(tried, next)
		res, err = next.Invoke(ctx, inv)
	}
	return res, err
}

// notRun reports whether a registry's cluster failed without a provider
// running the call: none available, the connection gone, or the provider
// stopping. Another registry's provider may answer it; a timeout or a
// business error it would not.
func notRun(err error) bool {
	switch kernel.CodeOf(err) {
	case kernel.CodeNoProvider, kernel.CodeNetwork, kernel.CodeShuttingDown:
		return err != nil
	}
	return false
}

func nextAvailable(registries, tried []kernel.Invoker) kernel.Invoker {
	for _, r := range registries {
		if !contains(tried, r) && r.IsAvailable() {
			return r
		}
	}
	return nil
}

// callZone is the call's zone and whether it is forced.
func callZone(u *kernel.URL, inv *kernel.Invocation) (zone string, force bool) {
	read := func(keys ...string) string {
		for _, k := range keys {
			if v := inv.AttachmentString(k); v != "" {
				return v
			}
		}
		for _, k := range keys {
			if v := u.MethodParam(inv.Method, k); v != "" {
				return v
			}
		}
		return ""
	}
	zone = read(KeyRegistryZone, KeyRegistryZoneGo)
	return zone, zone != "" && strings.EqualFold(read(KeyRegistryZoneForce, KeyRegistryZoneForceGo), "true")
}

// chooseRegistry is Java's ZoneAwareClusterInvoker.doInvoke's choice.
func chooseRegistry(c *clusterInvoker, registries []kernel.Invoker, inv *kernel.Invocation, zone string, force bool) (kernel.Invoker, error) {
	for _, r := range registries {
		if r.IsAvailable() && r.URL().ParamBool(KeyRegistryPreferred, false) {
			return r, nil
		}
	}
	if zone != "" {
		for _, r := range registries {
			if r.IsAvailable() && r.URL().Param(KeyRegistryZoneGo) == zone {
				return r, nil
			}
		}
		if force {
			return nil, kernel.Errorf(kernel.CodeNoProvider,
				"No registry instance in zone or no available providers in the registry, zone: %s, registries: %s (%s.%s; the call forces its zone with registry_zone_force: start a provider in that zone, give a registry zone: %s, or let the call leave its zone)",
				zone, registryNames(registries), c.dir.URL().ServiceKey(), inv.Method, zone)
		}
	}
	if iv, err := c.pick(registries, nil, inv); err == nil && iv.IsAvailable() {
		return iv, nil
	}
	for _, r := range registries {
		if r.IsAvailable() {
			return r, nil
		}
	}
	return nil, kernel.Errorf(kernel.CodeNoProvider, "No provider available in registries %s for %s.%s; check that a provider is running and registered in one of them",
		registryNames(registries), c.dir.URL().ServiceKey(), inv.Method)
}

func registryNames(registries []kernel.Invoker) string {
	names := make([]string, len(registries))
	for i, r := range registries {
		u := r.URL()
		names[i] = u.Param(KeyRegistryID)
		if z := u.Param(KeyRegistryZoneGo); z != "" {
			names[i] += " (zone " + z + ")"
		}
	}
	return strings.Join(names, ", ")
}
