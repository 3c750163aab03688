package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// answering is a provider whose answer a function of its URL gives.
type answering struct {
	url    *kernel.URL
	answer func(u *kernel.URL, inv *kernel.Invocation) (any, error)
	calls  *atomic.Int64
	down   atomic.Bool
}

func (a *answering) URL() *kernel.URL  { return a.url }
func (a *answering) IsAvailable() bool { return !a.down.Load() }
func (a *answering) Destroy()          {}
func (a *answering) Invoke(_ context.Context, inv *kernel.Invocation) (kernel.Result, error) {
	a.calls.Add(1)
	v, err := a.answer(a.url, inv)
	return kernel.Result{Value: v}, err
}

// syncBuf is a log the test reads while callers write it.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// groups joins a reference of consumer URL ref over a GroupDirectory whose
// groups are failover clusters of answering providers.
func groups(t *testing.T, ref string, log *slog.Logger, answer func(u *kernel.URL, inv *kernel.Invocation) (any, error)) (kernel.Invoker, *GroupDirectory, *sync.Map) {
	t.Helper()
	lbs := kernel.NewLoader[extension.LoadBalance]("loadbalance", Random)
	lbs.Register(Random, func() (extension.LoadBalance, error) { return NewRandom(), nil }, nil)
	byAddr := &sync.Map{} // address -> *answering
	consumer := kernel.MustParseURL(ref)
	gd := NewGroupDirectory(consumer, log, func(group string) (Part, error) {
		u := consumer.WithParam(kernel.KeyGroup, group)
		rd := NewRegistryDirectory(u, func(p *kernel.URL) (kernel.Invoker, error) {
			a := &answering{url: p, answer: answer, calls: &atomic.Int64{}}
			byAddr.Store(p.Address(), a)
			return a, nil
		}, log)
		iv, err := NewFailover(lbs, log).Join(rd)
		return Part{Dir: rd, Invoker: iv}, err
	})
	iv, err := NewMergeable(log, nil).Join(gd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(iv.Destroy)
	return iv, gd, byAddr
}

func provider(port int, group string) *kernel.URL {
	return kernel.MustParseURL(fmt.Sprintf("dubbo://127.0.0.1:%d/org.example.MenuService?group=%s", port, group))
}

// MergeableClusterInvokerTest, over a directory of groups split from one
// registry list: lists and maps merge by type, `.merge` calls the
// answers' method, a failed group is logged and left out, and without a
// merger one group answers.
func TestMergeableMergesGroups(t *testing.T) {
	var logs syncBuf
	log := slog.New(slog.NewTextHandler(&logs, nil))
	answer := func(u *kernel.URL, inv *kernel.Invocation) (any, error) {
		g := u.Param(kernel.KeyGroup)
		switch inv.Method {
		case "list":
			return []string{g + "1", g + "2"}, nil
		case "map":
			return map[any]any{g: int32(1), "shared": g}, nil
		case "menu":
			return &menu{Menus: map[string][]int32{g: {1}, "shared": {int32(u.Port)}}}, nil
		case "fails":
			if g == "b" {
				return nil, kernel.BizError(errors.New("menu of b is closed"))
			}
			return []string{g}, nil
		}
		return g, nil
	}
	iv, gd, _ := groups(t, "consumer://127.0.0.1/org.example.MenuService?group=*&merger=true&menu.merger=.merge&one.merger=false", log, answer)
	gd.Notify([]*kernel.URL{provider(1, "a"), provider(2, "b"), provider(3, "c")})

	call := func(method string) (any, error) {
		res, err := iv.Invoke(context.Background(), kernel.NewInvocation(method))
		return res.Value, err
	}
	if v, err := call("list"); err != nil || !reflect.DeepEqual(v, []string{"a1", "a2", "b1", "b2", "c1", "c2"}) {
		t.Fatalf("list: %v %v", v, err)
	}
	// Groups in the order of their names: the last one wins a shared key.
	if v, err := call("map"); err != nil || !reflect.DeepEqual(v, map[any]any{"a": int32(1), "b": int32(1), "c": int32(1), "shared": "c"}) {
		t.Fatalf("map: %v %v", v, err)
	}
	v, err := call("menu")
	if err != nil {
		t.Fatal(err)
	}
	if m := v.(*menu).Menus; !reflect.DeepEqual(m["shared"], []int32{1, 2, 3}) || len(m) != 4 {
		t.Fatalf("menu: %v", m)
	}
	if v, err := call("fails"); err != nil || !reflect.DeepEqual(v, []string{"a", "c"}) {
		t.Fatalf("fails: %v %v", v, err)
	}
	if !strings.Contains(logs.String(), "invoke group [ b ] failed; its answer is left out of the merge") || !strings.Contains(logs.String(), "menu of b is closed") {
		t.Fatalf("no log of the failed group:\n%s", logs.String())
	}
	if v, err := call("one"); err != nil || v != "a" {
		t.Fatalf("no merger: %v %v, want the first group's answer", v, err)
	}

	// A group whose providers all leave leaves; one that comes, comes.
	gd.Notify([]*kernel.URL{provider(1, "a"), provider(4, "d")})
	if v, err := call("list"); err != nil || !reflect.DeepEqual(v, []string{"a1", "a2", "d1", "d2"}) {
		t.Fatalf("after the change: %v %v", v, err)
	}
	if n := len(gd.Invokers()); n != 2 {
		t.Fatalf("%d providers listed, want 2", n)
	}
}

func TestMergeableFailures(t *testing.T) {
	down := func(code kernel.Code) func(*kernel.URL, *kernel.Invocation) (any, error) {
		return func(u *kernel.URL, _ *kernel.Invocation) (any, error) {
			return nil, kernel.Errorf(code, "group %s: down", u.Param(kernel.KeyGroup))
		}
	}
	for _, code := range []kernel.Code{kernel.CodeNoProvider, kernel.CodeNetwork} {
		for _, merger := range []string{"", "list"} {
			iv, gd, _ := groups(t, "consumer://127.0.0.1/S?group=a,b&retries=0&merger="+merger, quiet, down(code))
			gd.Notify([]*kernel.URL{provider(1, "a"), provider(2, "b")})
			_, err := iv.Invoke(context.Background(), kernel.NewInvocation("m"))
			if kernel.CodeOf(err) != code {
				t.Errorf("both groups fail with %v, merger %q: %v", code, merger, err)
			}
			if merger != "" && !strings.Contains(err.Error(), "none of its 2 groups answered") {
				t.Errorf("merger %q: %v", merger, err)
			}
		}
	}
	// merger default for a type with no merger (Java's Menu).
	iv, gd, _ := groups(t, "consumer://127.0.0.1/S?group=*&merger=default", quiet, func(*kernel.URL, *kernel.Invocation) (any, error) { return &menu{}, nil })
	gd.Notify([]*kernel.URL{provider(1, "a"), provider(2, "b")})
	if _, err := iv.Invoke(context.Background(), kernel.NewInvocation("m")); err == nil || !strings.Contains(err.Error(), "There is no merger to merge result.") {
		t.Fatalf("merger default for *menu: %v", err)
	}
	// No group at all.
	iv, _, _ = groups(t, "consumer://127.0.0.1/S?group=*&merger=true", quiet, nil)
	if _, err := iv.Invoke(context.Background(), kernel.NewInvocation("m")); kernel.CodeOf(err) != kernel.CodeNoProvider {
		t.Fatalf("no group: %v", err)
	}
}

// Without a merger, a group with no provider available passes the call on
// (Java's NO_INVOKER_AVAILABLE_AFTER_FILTER), and an unavailable one is
// not called.
func TestMergeableWithoutMergerSkipsGroupsWithoutProvider(t *testing.T) {
	iv, gd, byAddr := groups(t, "consumer://127.0.0.1/S?group=*", quiet, func(u *kernel.URL, _ *kernel.Invocation) (any, error) {
		return u.Param(kernel.KeyGroup), nil
	})
	gd.Notify([]*kernel.URL{provider(1, "a"), provider(2, "b")})
	a, _ := byAddr.Load("127.0.0.1:1")
	a.(*answering).down.Store(true)
	for range 10 {
		res, err := iv.Invoke(context.Background(), kernel.NewInvocation("m"))
		if err != nil || res.Value != "b" {
			t.Fatalf("%v %v, want b's answer", res.Value, err)
		}
	}
	if n := a.(*answering).calls.Load(); n != 0 {
		t.Fatalf("the unavailable group was called %d times", n)
	}
}

// 16 callers on three groups, the merge under -race.
func TestMergeableConcurrentCallers(t *testing.T) {
	iv, gd, _ := groups(t, "consumer://127.0.0.1/S?group=*&merger=list", quiet, func(u *kernel.URL, inv *kernel.Invocation) (any, error) {
		return []any{u.Param(kernel.KeyGroup), inv.Args[0]}, nil
	})
	gd.Notify([]*kernel.URL{provider(1, "a"), provider(2, "b"), provider(3, "c")})
	var wg sync.WaitGroup
	var bad atomic.Int64
	for w := range 16 {
		wg.Go(func() {
			for i := range 200 {
				res, err := iv.Invoke(context.Background(), kernel.NewInvocation("m", w*1000+i))
				want := []any{"a", w*1000 + i, "b", w*1000 + i, "c", w*1000 + i}
				if err != nil || !reflect.DeepEqual(res.Value, want) {
					bad.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n := bad.Load(); n > 0 {
		t.Fatalf("%d of 3200 calls merged wrong", n)
	}
	if got := slices.Sorted(func(yield func(string) bool) {
		for _, iv := range gd.Invokers() {
			if !yield(iv.URL().Param(kernel.KeyGroup)) {
				return
			}
		}
	}); !reflect.DeepEqual(got, []string{"a", "b", "c"}) {
		t.Fatalf("providers' groups %v", got)
	}
}
