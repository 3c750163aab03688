package governance

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/weftrpc/weft/cluster"
	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/registry"
)

// Rules is one reference's share of Dubbo Admin's rules: the
// documents an operator writes into the config center (group dubbo) under
// Dubbo's keys, watched while the App runs and applied to the reference's
// directory as they change:
//
//   - <interface>:<version>:<group>.condition-router and
//     <consumer application>.condition-router: condition routers;
//   - <provider application>.tag-router: the tag rule (the provider's
//     application is the remote.application of the first provider listed,
//     as Java's TagStateRouter reads it);
//   - <consumer application>.configurators and
//     <interface>:<version>:<group>.configurators: override rules laid over
//     the provider URLs after the consumer's own settings;
//   - <provider application>.MESHAPPRULE: Dubbo 3's mesh rules
//     (VirtualService, DestinationRule), one document per application the
//     providers belong to (their remote.application, as Java's
//     MeshRuleRouter reads them), watched while providers of that
//     application are listed.
//
// A document that does not parse is rejected with its reason logged, and
// the rule it would replace stays; a deleted document removes its rule.
type Rules struct {
	log      *slog.Logger
	ref      string
	dc       extension.DynamicConfiguration
	consumer *kernel.URL
	host     string // the consumer's address, for rules that name consumers

	svcCondKey, appCondKey, svcCfgKey, appCfgKey string

	mu      sync.Mutex
	dir     extension.RoutedDirectory
	static  []extension.Router // the reference's own routers (config)
	svcCond *ConditionRulesRouter
	appCond *ConditionRulesRouter
	tag     *cluster.TagRouter
	svcCfg  Configurators
	appCfg  Configurators
	tagApp  string // the provider application whose tag rule is watched
	tagKey  string
	closed  bool
	watched []string // keys listened to, for close

	// Mesh rules: meshWant is the providers' applications (sorted), which
	// reconcileMesh subscribes to; meshKeys the keys subscribed (key to
	// application), meshGroups their rules, mesh the router applying them.
	mesh       *cluster.MeshRouter
	meshWant   []string
	meshKeys   map[string]string
	meshGroups map[string]*cluster.MeshRuleGroup
	// meshSub orders subscription changes; meshSubscribed is reconcileMesh's.
	meshSub        sync.Mutex
	meshSubscribed map[string]bool
}

// tagRulePriority runs a tag rule's router first, where the default tag
// router runs (cluster.TagRouterFactory's default).
const tagRulePriority = -100

// ruleReadTimeout bounds the first read of each rule document.
const ruleReadTimeout = 5 * time.Second

// Watch starts applying the rules of the reference ref (its consumer URL,
// the consumer application app) from dc to its directory dir, which keeps
// the reference's own routers (static) beside the rules' ones.
func Watch(dc extension.DynamicConfiguration, log *slog.Logger, ref string, consumer *kernel.URL, app string,
	dir extension.RoutedDirectory, static []extension.Router) *Rules {
	g := &Rules{log: log, ref: ref, dc: dc, consumer: consumer, host: consumer.Host,
		meshKeys: map[string]string{}, meshGroups: map[string]*cluster.MeshRuleGroup{}, meshSubscribed: map[string]bool{}}
	key := RuleKeyOf(consumer)
	g.svcCondKey, g.svcCfgKey = ConditionRouterKey(key), ConfiguratorsKey(key)
	if app != "" {
		g.appCondKey, g.appCfgKey = ConditionRouterKey(app), ConfiguratorsKey(app)
	}
	g.Retarget(dir, static)
	for _, k := range []string{g.svcCondKey, g.appCondKey, g.svcCfgKey, g.appCfgKey} {
		if k != "" {
			g.watch(k)
		}
	}
	return g
}

// watch listens to the document under key, then reads it: no change is
// missed between the two, and one seen twice applies the same rule twice.
func (g *Rules) watch(key string) {
	if err := g.dc.AddListener(key, GovernanceGroup, g); err != nil {
		g.log.Warn("weft: governance: cannot watch a rule document; it does not apply", "reference", g.ref, "key", key, "err", err)
		return
	}
	g.mu.Lock()
	if g.closed {
		// Close ran while this watch started (followTagRule and
		// reconcileMesh watch from their own goroutines): it did not see
		// the key, so undo here.
		g.mu.Unlock()
		g.dc.RemoveListener(key, GovernanceGroup, g)
		return
	}
	g.watched = append(g.watched, key)
	g.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), ruleReadTimeout)
	content, err := g.dc.GetConfig(ctx, key, GovernanceGroup)
	cancel()
	if err != nil {
		g.log.Warn("weft: governance: cannot read a rule document; it applies once it changes", "reference", g.ref, "key", key, "err", err)
		return
	}
	if content != "" {
		g.Process(extension.ConfigChangedEvent{Key: key, Group: GovernanceGroup, Content: content})
	}
}

// Process applies one document's change.
func (g *Rules) Process(ev extension.ConfigChangedEvent) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	data := []byte(ev.Content)
	var err error
	var notes []string
	switch ev.Key {
	case g.svcCondKey, g.appCondKey:
		var router *ConditionRulesRouter
		if !ev.Deleted {
			prio := ServiceConditionRouterPriority
			if ev.Key == g.appCondKey {
				prio = AppConditionRouterPriority
			}
			var rules *ConditionRules
			if rules, err = ParseConditionRules(ev.Key, data); err == nil {
				router = rules.Router(prio)
			}
		}
		if err == nil {
			if ev.Key == g.appCondKey {
				g.appCond = router
			} else {
				g.svcCond = router
			}
		}
	case g.tagKey:
		var router *cluster.TagRouter
		if !ev.Deleted {
			var rules *cluster.TagRules
			if rules, err = ParseTagRules(ev.Key, data); err == nil {
				router = rules.Router(tagRulePriority)
			}
		}
		if err == nil {
			g.tag = router
		}
	case g.svcCfgKey, g.appCfgKey:
		var cfgs Configurators
		if !ev.Deleted {
			var rules *OverrideRules
			if rules, err = ParseOverrideRules(ev.Key, data); err == nil {
				cfgs = rules.Configurators
			}
		}
		if err == nil {
			if ev.Key == g.appCfgKey {
				g.appCfg = cfgs
			} else {
				g.svcCfg = cfgs
			}
		}
	default:
		app, ok := g.meshKeys[ev.Key]
		if !ok {
			return // not (or no longer) watched
		}
		var group *cluster.MeshRuleGroup
		if !ev.Deleted {
			var rules *MeshRules
			if rules, err = ParseMeshRules(ev.Key, data); err == nil {
				group, notes = rules.Group, rules.Notes
			}
		}
		if err == nil {
			if group == nil {
				delete(g.meshGroups, app)
			} else {
				g.meshGroups[app] = group
			}
			g.rebuildMeshLocked()
		}
	}
	if err != nil {
		g.log.Warn("weft: governance: rule rejected; the rule it would replace stays", "reference", g.ref, "key", ev.Key, "err", err)
		return
	}
	if len(notes) > 0 {
		g.log.Warn("weft: governance: rule applied with parts that do not act", "reference", g.ref, "key", ev.Key, "notes", notes)
	}
	what := "applied"
	if ev.Deleted {
		what = "removed"
	}
	g.log.Info("weft: governance: rule "+what, "reference", g.ref, "key", ev.Key)
	g.applyLocked(ev.Key == g.svcCfgKey || ev.Key == g.appCfgKey)
}

// Retarget points the rules at a new directory (the reference was referred
// again after a config change) with the reference's own routers.
func (g *Rules) Retarget(dir extension.RoutedDirectory, static []extension.Router) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.dir, g.static = dir, static
	g.applyLocked(true)
}

// applyLocked sets the directory's routers: the reference's own, with the
// tag rule's router in place of the default tag router when there is one,
// then the condition rules'. reconfigure runs the directory's providers
// through the override rules again (they changed, or the directory is new).
func (g *Rules) applyLocked(reconfigure bool) {
	if g.dir == nil {
		return
	}
	routers := make([]extension.Router, 0, len(g.static)+4)
	for _, r := range g.static {
		if cluster.IsTagRouter(r) && g.tag != nil {
			continue
		}
		routers = append(routers, r)
	}
	if g.tag != nil {
		routers = append(routers, g.tag)
	}
	if g.mesh != nil {
		routers = append(routers, g.mesh)
	}
	if g.svcCond != nil {
		routers = append(routers, g.svcCond)
	}
	if g.appCond != nil {
		routers = append(routers, g.appCond)
	}
	g.dir.SetRouters(routers)
	if rd, ok := g.dir.(extension.ConfiguredDirectory); ok && reconfigure {
		// SetConfigure runs the last provider list through the rules
		// again. Not under g.mu: the directory calls configure, which
		// takes it, under its own lock.
		go rd.SetConfigure(g.configure)
	}
}

// configure is the directory's override step: the consumer application's
// rules, then the service's, as Java orders them. It also notes the
// providers' application, whose tag rule applies.
func (g *Rules) configure(urls []*kernel.URL) []*kernel.URL {
	g.mu.Lock()
	app, svc := g.appCfg, g.svcCfg
	closed := g.closed
	g.mu.Unlock()
	if len(urls) > 0 && !closed {
		if pa := urls[0].Param(registry.KeyRemoteApplication); pa != "" {
			g.followTagRule(pa)
		}
	}
	if !closed {
		g.followMeshRules(providerApps(urls))
	}
	if len(app) == 0 && len(svc) == 0 {
		return urls
	}
	return ConfigureProviders(urls, g.host, app, svc)
}

// followTagRule watches <app>.tag-router once the providers' application
// is known (or changes). The watch runs on its own goroutine: configure
// runs inside the directory's notification, which must not wait on the
// config center.
func (g *Rules) followTagRule(app string) {
	g.mu.Lock()
	if g.tagApp == app || g.closed {
		g.mu.Unlock()
		return
	}
	old := g.tagKey
	g.tagApp, g.tagKey, g.tag = app, TagRouterKey(app), nil
	key := g.tagKey
	g.mu.Unlock()
	go func() {
		if old != "" {
			g.dc.RemoveListener(old, GovernanceGroup, g)
		}
		g.watch(key)
	}()
}

// providerApps is the applications of the providers, sorted, without
// empty and "unknown" ones (Java's MeshRuleRouter.registerAppRule).
func providerApps(urls []*kernel.URL) []string {
	var apps []string
	for _, u := range urls {
		if a := u.Param(registry.KeyRemoteApplication); a != "" && a != meshInvalidApp && !slices.Contains(apps, a) {
			apps = append(apps, a)
		}
	}
	slices.Sort(apps)
	return apps
}

// meshInvalidApp is Java's MeshRuleConstants.INVALID_APP_NAME.
const meshInvalidApp = "unknown"

// followMeshRules notes the providers' applications and, when they
// changed, has reconcileMesh follow them. Like followTagRule it does not
// wait on the config center: configure runs inside the directory's
// notification.
func (g *Rules) followMeshRules(apps []string) {
	g.mu.Lock()
	if g.closed || slices.Equal(g.meshWant, apps) {
		g.mu.Unlock()
		return
	}
	g.meshWant = apps
	g.mu.Unlock()
	go g.reconcileMesh()
}

// reconcileMesh subscribes to the mesh rules of the applications in
// meshWant and unsubscribes from the others, until they agree; one runs
// at a time, so changes apply in order. An application that goes loses
// its rules (its providers are gone); one that comes back is read again.
func (g *Rules) reconcileMesh() {
	g.meshSub.Lock()
	defer g.meshSub.Unlock()
	for {
		g.mu.Lock()
		want, closed := g.meshWant, g.closed
		g.mu.Unlock()
		if closed {
			return // Close removes the listeners
		}
		var add, drop []string
		for _, a := range want {
			if !g.meshSubscribed[a] {
				add = append(add, a)
			}
		}
		for a := range g.meshSubscribed {
			if !slices.Contains(want, a) {
				drop = append(drop, a)
			}
		}
		if len(add) == 0 && len(drop) == 0 {
			return
		}
		for _, a := range drop {
			key := MeshRuleKey(a)
			delete(g.meshSubscribed, a)
			g.mu.Lock()
			delete(g.meshKeys, key)
			g.watched = slices.DeleteFunc(g.watched, func(k string) bool { return k == key })
			if _, had := g.meshGroups[a]; had {
				delete(g.meshGroups, a)
				g.rebuildMeshLocked()
				g.applyLocked(false)
			}
			g.mu.Unlock()
			g.dc.RemoveListener(key, GovernanceGroup, g)
		}
		for _, a := range add {
			key := MeshRuleKey(a)
			g.meshSubscribed[a] = true
			g.mu.Lock()
			g.meshKeys[key] = a
			g.mu.Unlock()
			g.watch(key)
		}
	}
}

// rebuildMeshLocked makes the router of the mesh rules in force (nil:
// none).
func (g *Rules) rebuildMeshLocked() {
	if len(g.meshGroups) == 0 {
		g.mesh = nil
		return
	}
	groups := make([]*cluster.MeshRuleGroup, 0, len(g.meshGroups))
	for _, grp := range g.meshGroups {
		groups = append(groups, grp)
	}
	g.mesh = cluster.NewMeshRouter(cluster.MeshRulePriority, groups)
}

// Close stops watching.
func (g *Rules) Close() {
	g.mu.Lock()
	g.closed = true
	keys := g.watched
	g.watched = nil
	g.mu.Unlock()
	for _, k := range keys {
		g.dc.RemoveListener(k, GovernanceGroup, g)
	}
}
