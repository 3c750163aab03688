// Package governance reads Dubbo Admin's governance rules: the YAML
// documents an operator writes into a config center (group "dubbo") under
// Dubbo's keys — condition rules (".condition-router"), tag rules
// (".tag-router") and override rules (".configurators") — and turns them
// into what applies them: cluster's routers, and Configurators laid over
// provider URLs.
//
// It exists apart from cluster because the documents are a wire format of
// their own, versioned by Dubbo Admin (configVersion v2.7, v3.0), written
// by whoever can write to the config center and so read defensively
// (bounded size, depth and error quotes, RuleError naming the field), while
// cluster only routes and balances. The dependency goes one way: governance
// builds on cluster's routers and matchers; cluster knows nothing of rule
// documents.
package governance
