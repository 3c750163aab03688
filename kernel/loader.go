package kernel

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// Activate declares when an extension joins an activated list by itself
// (Dubbo's @Activate). It applies when the requested group is one of Groups
// (or no group is requested) and, if Keys is not empty, when the URL carries
// one of the keys: `k` set to a value other than "", false, 0, null or N/A
// (also as a method-level `m.k`), or `k:v` equal to v. Activated extensions run
// sorted by Order, then by name.
type Activate struct {
	Groups []string
	Keys   []string
	Order  int
}

// Destroyer is an extension that releases what it holds with Destroy
// (Dubbo's Protocol.destroy) rather than io.Closer's Close: the Loader calls
// it when it closes.
type Destroyer interface {
	Destroy()
}

// Factory creates the one instance of an extension. It runs at most once per
// Loader and name, on the first Get.
type Factory[T any] func() (T, error)

// Wrapper decorates every instance a Loader creates (Dubbo's wrapper classes:
// a filter wrapper around every protocol, say).
type Wrapper[T any] struct {
	Name  string
	Order int
	Wrap  func(name string, inner T) (T, error)
}

type entry[T any] struct {
	name     string
	factory  Factory[T]
	activate *Activate
	once     sync.Once
	inst     T
	err      error
	made     atomic.Bool
}

type table[T any] struct {
	byName    map[string]*entry[T]
	names     []string    // sorted
	activates []*entry[T] // sorted by order, then name
	wrappers  []Wrapper[T]
}

// Loader holds the named extensions of one extension point, Dubbo's
// ExtensionLoader. Each App owns its Loaders; two Loaders share nothing.
// Registration is meant for start-up; lookups are lock-free and safe for
// concurrent use at any time.
type Loader[T any] struct {
	point       string
	defaultName string

	mu sync.Mutex // serialises writers
	t  atomic.Pointer[table[T]]
}

// NewLoader makes an empty Loader for the extension point named point (used in
// error messages, e.g. "filter") whose default extension is defaultName.
func NewLoader[T any](point, defaultName string) *Loader[T] {
	l := &Loader[T]{point: point, defaultName: defaultName}
	l.t.Store(&table[T]{byName: map[string]*entry[T]{}})
	return l
}

// Point is the name of the extension point.
func (l *Loader[T]) Point() string { return l.point }

// DefaultName is the name Default returns.
func (l *Loader[T]) DefaultName() string { return l.defaultName }

// Register adds an extension under name. act, if not nil, lets it activate by
// itself. Registering a name twice is an error.
func (l *Loader[T]) Register(name string, f Factory[T], act *Activate) error {
	if name == "" || strings.ContainsAny(name, ", ") || strings.HasPrefix(name, "-") || name == "default" {
		return fmt.Errorf("weft: %s extension name %q: want a non-empty name without commas or spaces, not starting with '-', not \"default\"", l.point, name)
	}
	if f == nil {
		return fmt.Errorf("weft: %s extension %q: nil factory", l.point, name)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.t.Load()
	if _, dup := old.byName[name]; dup {
		return fmt.Errorf("weft: %s extension %q registered twice", l.point, name)
	}
	nt := &table[T]{byName: make(map[string]*entry[T], len(old.byName)+1), wrappers: old.wrappers}
	for k, v := range old.byName {
		nt.byName[k] = v
	}
	var a *Activate
	if act != nil {
		c := *act
		a = &c
	}
	nt.byName[name] = &entry[T]{name: name, factory: f, activate: a}
	nt.index()
	l.t.Store(nt)
	return nil
}

// AddWrapper adds a wrapper applied to every instance created after this call.
// The wrapper with the lowest Order ends up outermost.
func (l *Loader[T]) AddWrapper(w Wrapper[T]) {
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.t.Load()
	nt := &table[T]{byName: old.byName, names: old.names, activates: old.activates}
	nt.wrappers = append(append([]Wrapper[T](nil), old.wrappers...), w)
	sort.SliceStable(nt.wrappers, func(i, j int) bool {
		a, b := nt.wrappers[i], nt.wrappers[j]
		if a.Order != b.Order {
			return a.Order < b.Order
		}
		return a.Name < b.Name
	})
	l.t.Store(nt)
}

func (t *table[T]) index() {
	t.names = make([]string, 0, len(t.byName))
	t.activates = t.activates[:0]
	for n, e := range t.byName {
		t.names = append(t.names, n)
		if e.activate != nil {
			t.activates = append(t.activates, e)
		}
	}
	sort.Strings(t.names)
	sort.Slice(t.activates, func(i, j int) bool {
		a, b := t.activates[i], t.activates[j]
		if a.activate.Order != b.activate.Order {
			return a.activate.Order < b.activate.Order
		}
		return a.name < b.name
	})
}

// Names lists the registered names, sorted.
func (l *Loader[T]) Names() []string { return append([]string(nil), l.t.Load().names...) }

// Has reports whether name is registered.
func (l *Loader[T]) Has(name string) bool {
	_, ok := l.t.Load().byName[name]
	return ok
}

// UnknownError is returned for a name that is not registered. It lists the
// known ones, so a typo in config can be fixed from the message alone.
type UnknownError struct {
	Point string
	Name  string
	Known []string
}

func (e *UnknownError) Error() string {
	if len(e.Known) == 0 {
		return fmt.Sprintf("unknown %s extension %q (none is registered)", e.Point, e.Name)
	}
	return fmt.Sprintf("unknown %s extension %q (known: %s)", e.Point, e.Name, strings.Join(e.Known, ", "))
}

func (l *Loader[T]) unknown(name string) error {
	return &UnknownError{Point: l.point, Name: name, Known: l.Names()}
}

// Get returns the instance named name, creating it on first use. Concurrent
// first calls create it once; a factory error is returned to every caller.
func (l *Loader[T]) Get(name string) (T, error) {
	t := l.t.Load()
	e, ok := t.byName[name]
	if !ok {
		var zero T
		return zero, l.unknown(name)
	}
	return l.instance(e, t.wrappers)
}

func (l *Loader[T]) instance(e *entry[T], wrappers []Wrapper[T]) (T, error) {
	e.once.Do(func() {
		inst, err := e.factory()
		if err != nil {
			e.err = fmt.Errorf("weft: create %s extension %q: %w", l.point, e.name, err)
			return
		}
		// Apply from the highest order inwards so the lowest ends outermost.
		for i := len(wrappers) - 1; i >= 0; i-- {
			if inst, err = wrappers[i].Wrap(e.name, inst); err != nil {
				e.err = fmt.Errorf("weft: wrap %s extension %q with %q: %w", l.point, e.name, wrappers[i].Name, err)
				return
			}
		}
		e.inst = inst
		e.made.Store(true)
	})
	return e.inst, e.err
}

// Default returns the default extension.
func (l *Loader[T]) Default() (T, error) {
	if l.defaultName == "" {
		var zero T
		return zero, fmt.Errorf("weft: %s extension point has no default", l.point)
	}
	return l.Get(l.defaultName)
}

// Choose returns the extension named by the URL parameter key, method-level
// first (`sayHello.loadbalance` beats `loadbalance`), else the default
// (Dubbo's adaptive extension).
func (l *Loader[T]) Choose(u *URL, method, key string) (T, error) {
	name := l.defaultName
	if u != nil {
		name = u.MethodParamOr(method, key, name)
	}
	return l.Get(name)
}

// CheckNames returns an error naming the first unknown name in a
// comma-separated list as Activate reads it ("-x", "default" and "-default"
// allowed). Config validation calls it at start-up.
func (l *Loader[T]) CheckNames(list string) error {
	t := l.t.Load()
	for _, n := range splitList(list) {
		n = strings.TrimPrefix(n, "-")
		if n == "default" {
			continue
		}
		if _, ok := t.byName[n]; !ok {
			return l.unknown(n)
		}
	}
	return nil
}

// ActivateNames computes the names Activate would return, in order.
//
// The user's list is url[key], comma-separated. Extensions whose Activate
// matches group and URL are taken in (order, name) order, except those the
// list names or removes with "-name"; "-default" drops them all. The list's
// own names are then placed as written, with the activated set at the position
// of "default", or before all of them when "default" is absent. A name removed
// with "-name" never appears. An unknown name is an error.
func (l *Loader[T]) ActivateNames(u *URL, key, group string) ([]string, error) {
	t := l.t.Load()
	if u == nil {
		u = NewURL("", "", 0, "", nil)
	}
	list := splitList(u.Param(key))
	removed := map[string]bool{}
	listed := map[string]bool{}
	noDefaults := false
	for _, n := range list {
		switch {
		case n == "-default":
			noDefaults = true
		case strings.HasPrefix(n, "-"):
			name := n[1:]
			if _, ok := t.byName[name]; !ok {
				return nil, l.unknown(name)
			}
			removed[name] = true
		case n == "default":
		default:
			if _, ok := t.byName[n]; !ok {
				return nil, l.unknown(n)
			}
			listed[n] = true
		}
	}
	var auto []string
	if !noDefaults {
		for _, e := range t.activates {
			if listed[e.name] || removed[e.name] {
				continue
			}
			if matchGroup(group, e.activate.Groups) && isActive(e.activate.Keys, u) {
				auto = append(auto, e.name)
			}
		}
	}
	out := make([]string, 0, len(auto)+len(list))
	placed := false
	for _, n := range list {
		switch {
		case n == "default":
			if !placed {
				out = append(out, auto...)
				placed = true
			}
		case strings.HasPrefix(n, "-"):
		case removed[n]:
		default:
			out = append(out, n)
		}
	}
	if !placed {
		out = append(auto, out...)
	}
	return out, nil
}

// Activate returns the instances of ActivateNames, in order.
func (l *Loader[T]) Activate(u *URL, key, group string) ([]T, error) {
	names, err := l.ActivateNames(u, key, group)
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(names))
	for _, n := range names {
		x, err := l.Get(n)
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, nil
}

// Close releases every instance created so far that implements io.Closer or
// has a Destroy method, in reverse name order.
func (l *Loader[T]) Close() error {
	t := l.t.Load()
	var errs []error
	for i := len(t.names) - 1; i >= 0; i-- {
		e := t.byName[t.names[i]]
		if !e.made.Load() {
			continue
		}
		switch c := any(e.inst).(type) {
		case io.Closer:
			if err := c.Close(); err != nil {
				errs = append(errs, fmt.Errorf("weft: close %s extension %q: %w", l.point, e.name, err))
			}
		case Destroyer:
			c.Destroy()
		}
	}
	return errors.Join(errs...)
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	parts := strings.Split(s, ",")
	out := parts[:0]
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func matchGroup(group string, groups []string) bool {
	if group == "" {
		return true
	}
	for _, g := range groups {
		if g == group {
			return true
		}
	}
	return false
}

func isActive(keys []string, u *URL) bool {
	if len(keys) == 0 {
		return true
	}
	for _, key := range keys {
		k, want, hasValue := strings.Cut(key, ":")
		found := false
		u.RangeParams(func(pk, pv string) bool {
			if pk != k && !strings.HasSuffix(pk, "."+k) {
				return true
			}
			if hasValue && pv == want || !hasValue && IsTruthy(pv) {
				found = true
				return false
			}
			return true
		})
		if found {
			return true
		}
	}
	return false
}
