package governance

import (
	"context"
	"log/slog"
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
//     the provider URLs after the consumer's own settings.
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
	g := &Rules{log: log, ref: ref, dc: dc, consumer: consumer, host: consumer.Host}
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
		return
	}
	if err != nil {
		g.log.Warn("weft: governance: rule rejected; the rule it would replace stays", "reference", g.ref, "key", ev.Key, "err", err)
		return
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
	routers := make([]extension.Router, 0, len(g.static)+3)
	for _, r := range g.static {
		if cluster.IsTagRouter(r) && g.tag != nil {
			continue
		}
		routers = append(routers, r)
	}
	if g.tag != nil {
		routers = append(routers, g.tag)
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
