package cluster

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// KeyMock is Dubbo's `mock` setting (method-level `m.mock` first):
//
//	force:return V   answer V without calling any provider
//	fail:return V    call; on a framework failure answer V
//	return V         same as fail:return V
//	throw [Class]    (after force: or fail:) answer a business error
//	true | default   on failure, call the Go fallback registered under the
//	                 interface name
//	NAME             on failure, call the fallback registered under NAME
//
// V is empty, null, true, false, a number, a quoted string, JSON, or any
// other text taken as a string. Business errors never trigger a mock.
const KeyMock = "mock"

// Fallbacks finds the Go fallback implementation registered under a name.
type Fallbacks func(name string) (kernel.Invoker, bool)

// MockWrapper wraps every Cluster so that its invokers honour `mock`: Dubbo's
// MockClusterWrapper, as a Loader wrapper.
func MockWrapper(fallbacks Fallbacks) kernel.Wrapper[extension.Cluster] {
	return kernel.Wrapper[extension.Cluster]{Name: "mock", Wrap: func(_ string, inner extension.Cluster) (extension.Cluster, error) {
		return &mockCluster{inner: inner, fallbacks: fallbacks}, nil
	}}
}

type mockCluster struct {
	inner     extension.Cluster
	fallbacks Fallbacks
}

func (m *mockCluster) Join(dir extension.Directory) (kernel.Invoker, error) {
	iv, err := m.inner.Join(dir)
	if err != nil {
		return nil, err
	}
	return &mockInvoker{Invoker: iv, fallbacks: m.fallbacks}, nil
}

type mockInvoker struct {
	kernel.Invoker
	fallbacks Fallbacks
}

func (m *mockInvoker) Invoke(ctx context.Context, inv *kernel.Invocation) (kernel.Result, error) {
	spec := strings.TrimSpace(m.URL().MethodParam(inv.Method, KeyMock))
	if spec == "" || spec == "false" {
		return m.Invoker.Invoke(ctx, inv)
	}
	if rest, ok := strings.CutPrefix(spec, "force:"); ok {
		return m.mock(ctx, strings.TrimSpace(rest), inv, nil)
	}
	res, err := m.Invoker.Invoke(ctx, inv)
	if err == nil || kernel.IsBiz(err) {
		return res, err
	}
	return m.mock(ctx, strings.TrimSpace(strings.TrimPrefix(spec, "fail:")), inv, err)
}

func (m *mockInvoker) mock(ctx context.Context, spec string, inv *kernel.Invocation, cause error) (kernel.Result, error) {
	switch {
	case strings.HasPrefix(spec, "return"):
		return kernel.Result{Value: ParseMockValue(strings.TrimSpace(strings.TrimPrefix(spec, "return")))}, nil
	case strings.HasPrefix(spec, "throw"):
		class := strings.TrimSpace(strings.TrimPrefix(spec, "throw"))
		msg := "mock exception of " + m.URL().ServiceKey() + "." + inv.Method
		return kernel.Result{}, &kernel.Error{Code: kernel.CodeBiz, Class: class, Msg: msg, Cause: cause}
	}
	name := spec
	if name == "true" || name == "default" {
		name = m.URL().Interface()
	}
	if m.fallbacks != nil {
		if fb, ok := m.fallbacks(name); ok {
			return fb.Invoke(ctx, inv)
		}
	}
	err := kernel.Errorf(kernel.CodeNoProvider, "mock=%s of %s: no fallback registered under %q; register one with weft.WithMock(%q, impl)",
		spec, m.URL().ServiceKey(), name, name)
	if cause != nil {
		err.Cause = cause
	}
	return kernel.Result{}, err
}

// ParseMockValue turns the V of `return V` into a value, as Dubbo's
// MockInvoker.parseMockValue does.
func ParseMockValue(v string) any {
	switch v {
	case "", "empty", "null":
		return nil
	case "true":
		return true
	case "false":
		return false
	}
	if len(v) >= 2 && (v[0] == '"' && v[len(v)-1] == '"' || v[0] == '\'' && v[len(v)-1] == '\'') {
		return v[1 : len(v)-1]
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return n
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		return f
	}
	if v[0] == '{' || v[0] == '[' {
		var x any
		if err := json.Unmarshal([]byte(v), &x); err == nil {
			return x
		}
	}
	return v
}

// RetryBudget passes on the wrapped cluster's (BudgetReporter).
func (m *mockInvoker) RetryBudget() (allowed, denied int64, on bool) {
	if b, ok := m.Invoker.(BudgetReporter); ok {
		return b.RetryBudget()
	}
	return 0, 0, false
}
