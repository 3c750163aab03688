package cluster

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// Mergeable is Dubbo's MergeableCluster. A reference whose `group` is "*"
// or a comma-separated list is joined by it over one invoker per provider
// group (a cluster of that group's providers; see GroupDirectory): a call
// goes to every group at once and their answers are merged as the method's
// `merger` (KeyMerger) says. Without a merger the first group that has a
// provider answers alone.
//
// A group that fails is logged and left out of the merge, as in Java;
// unlike Java, a call whose groups all failed returns the failure rather
// than an empty answer, which a caller could not tell from one.
const Mergeable = "mergeable"

// MergeableCluster is the Mergeable strategy with its mergers by name.
type MergeableCluster struct {
	log     *slog.Logger
	mergers Mergers
}

// NewMergeable returns the mergeable cluster; mergers are those `merger`
// may name besides the built-in ones (an App's Loader of extension.Merger;
// nil: none).
func NewMergeable(log *slog.Logger, mergers Mergers) *MergeableCluster {
	return &MergeableCluster{log: log, mergers: mergers}
}

// Join returns the invoker that calls every invoker dir lists.
func (m *MergeableCluster) Join(dir extension.Directory) (kernel.Invoker, error) {
	return &mergeInvoker{dir: dir, c: m}, nil
}

type mergeInvoker struct {
	dir    extension.Directory
	c      *MergeableCluster
	closed atomic.Bool
}

func (m *mergeInvoker) URL() *kernel.URL  { return m.dir.URL() }
func (m *mergeInvoker) IsAvailable() bool { return m.dir.IsAvailable() }

func (m *mergeInvoker) Destroy() {
	if !m.closed.Swap(true) {
		m.dir.Destroy()
	}
}

func (m *mergeInvoker) Invoke(ctx context.Context, inv *kernel.Invocation) (kernel.Result, error) {
	u := m.dir.URL()
	if m.closed.Load() {
		return kernel.Result{}, kernel.Errorf(kernel.CodeNoProvider, "reference to %s is destroyed", u.ServiceKey())
	}
	groups, err := m.dir.List(ctx, inv)
	if err != nil {
		return kernel.Result{}, err
	}
	if len(groups) == 0 {
		return kernel.Result{}, kernel.Errorf(kernel.CodeNoProvider,
			"no provider available for %s.%s in any group; check that a provider of one of the groups %q is running and its interface and version match",
			u.ServiceKey(), inv.Method, u.Param(kernel.KeyGroup))
	}
	spec := strings.TrimSpace(u.MethodParam(inv.Method, KeyMerger))
	if spec == "1" {
		spec = "true" // a YAML true, as config writes it
	}
	if noMerger(spec) {
		return m.first(ctx, groups, inv)
	}
	// Java calls every group, and logs each with no provider on every
	// call; a group known to have none available is left out here, and
	// the registry's log says why it has none.
	if live := availableOnly(groups); len(live) > 0 {
		groups = live
	}
	answers := m.fanOut(ctx, groups, inv)
	var (
		vals   []any
		res    kernel.Result
		failed error
	)
	for i, a := range answers {
		if a.err != nil {
			// Java logs a group's failure and merges the others'.
			m.c.log.Warn("weft: mergeable: invoke "+groupOf(groups[i])+" failed; its answer is left out of the merge",
				"service", u.ServiceKey(), "method", inv.Method, "err", a.err)
			if failed == nil {
				failed = a.err
			}
			continue
		}
		if vals == nil {
			res.Attachments = a.res.Attachments
		}
		vals = append(vals, a.res.Value)
	}
	switch len(vals) {
	case 0:
		return kernel.Result{}, &kernel.Error{Code: kernel.CodeOf(failed), Cause: failed,
			Msg: "mergeable call of " + u.ServiceKey() + "." + inv.Method + ": none of its " + strconv.Itoa(len(groups)) + " groups answered"}
	case 1:
		res.Value = vals[0]
		return res, nil
	}
	v, err := Merge(spec, vals, m.c.mergers)
	if err != nil {
		if ke, ok := err.(*kernel.Error); ok {
			ke.Msg = "mergeable call of " + u.ServiceKey() + "." + inv.Method + " (merger " + spec + "): " + ke.Msg
		}
		return kernel.Result{}, err
	}
	res.Value = v
	return res, nil
}

// first is the call without a merger: Java's first available group, or
// the next when it has no provider after routing.
func (m *mergeInvoker) first(ctx context.Context, groups []kernel.Invoker, inv *kernel.Invocation) (kernel.Result, error) {
	for _, g := range groups {
		if !g.IsAvailable() {
			continue
		}
		res, err := g.Invoke(ctx, inv)
		if kernel.CodeOf(err) == kernel.CodeNoProvider {
			continue
		}
		return res, err
	}
	return groups[0].Invoke(ctx, inv)
}

func availableOnly(ivs []kernel.Invoker) []kernel.Invoker {
	for i, iv := range ivs {
		if !iv.IsAvailable() {
			live := slices.Clone(ivs[:i])
			for _, rest := range ivs[i+1:] {
				if rest.IsAvailable() {
					live = append(live, rest)
				}
			}
			return live
		}
	}
	return ivs
}

// fanOut calls every group at once (Java sends them asynchronously and
// waits for all) and returns their answers in the groups' order.
func (m *mergeInvoker) fanOut(ctx context.Context, groups []kernel.Invoker, inv *kernel.Invocation) []answer {
	answers := make([]answer, len(groups))
	calls := make([]*kernel.Invocation, len(groups))
	calls[0] = inv
	for i := 1; i < len(groups); i++ {
		calls[i] = inv.Clone() // before any call may change inv
	}
	var wg sync.WaitGroup
	for i, g := range groups {
		wg.Go(func() {
			res, err := g.Invoke(ctx, calls[i])
			answers[i] = answer{res, err}
		})
	}
	wg.Wait()
	return answers
}

// groupOf names a group for logs as Java does ("group [ g ]"), with the
// provider's address when the invoker is one provider.
func groupOf(iv kernel.Invoker) string {
	u := iv.URL()
	s := "group [ " + u.Param(kernel.KeyGroup) + " ]"
	if u.Port != 0 {
		s += " at " + u.Address()
	}
	return s
}
