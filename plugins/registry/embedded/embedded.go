// Package embedded is weft's default registry: it needs no server. Providers
// and consumers of different processes on one machine find each other through
// a shared folder:
//
//	<dir>/<path-escaped service key>/<instance id>.json
//
// One file per registered provider URL (service key group/interface:version,
// instance id a hash of the URL string) holding the URL, the registering
// process's host and pid, its start time and a heartbeat the registry
// rewrites (temp file + rename) every `heartbeat` milliseconds.
//
// Subscribers watch their service folder with fsnotify plus a rescan every
// heartbeat, coalesce bursts of events and notify the full provider list only
// when it changed. An entry whose process is dead (same host, pid gone) or
// whose heartbeat is older than three of its intervals is ignored and deleted
// by whoever sees it.
package embedded

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
)

// Name is the registry's extension name (the protocol of its address URL).
const Name = "embedded"

const (
	// KeyDir names the folder when the address URL has no path.
	KeyDir = "dir"
	// KeyHeartbeat is the heartbeat interval in milliseconds.
	KeyHeartbeat = "heartbeat"
	// DefaultHeartbeat is the heartbeat interval when unset.
	DefaultHeartbeat = 2 * time.Second
	// staleBeats is how many heartbeat intervals an entry may miss.
	staleBeats = 3
	// coalesce is how long a subscriber waits after a change before scanning,
	// so a burst of file events costs one scan and one notification.
	coalesce = 50 * time.Millisecond
	entryExt = ".json"
)

// DefaultDir is the folder when the address URL names none.
func DefaultDir() string { return filepath.Join(os.TempDir(), "weft-registry") }

// Factory opens embedded registries.
type Factory struct{ Log *slog.Logger }

var _ extension.RegistryFactory = Factory{}

// GetRegistry opens the registry at `embedded:///abs/dir`, or at the `dir`
// parameter, or at DefaultDir; the folder is created if missing.
func (f Factory) GetRegistry(u *kernel.URL) (extension.Registry, error) {
	dir := DefaultDir()
	hb := DefaultHeartbeat
	if u != nil {
		if u.Path != "" {
			// ParseURL strips the leading slash of the path: embedded:///abs/dir.
			dir = "/" + u.Path
		} else if d := u.Param(KeyDir); d != "" {
			dir = d
		}
		if ms := u.ParamInt(KeyHeartbeat, 0); ms > 0 {
			hb = time.Duration(ms) * time.Millisecond
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("weft: embedded registry: folder %q: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("weft: embedded registry: %w", err)
	}
	log := f.Log
	if log == nil {
		log = slog.Default()
	}
	return New(abs, hb, log), nil
}

// entry is the content of one provider file.
type entry struct {
	URL string `json:"url"`
	// Host is the registering machine's host name: pids are checked only
	// on the same host.
	Host string `json:"host,omitempty"`
	PID  int    `json:"pid"`
	// Start and Heartbeat are Unix milliseconds; Interval is the writer's
	// heartbeat interval in milliseconds, so readers judge staleness by the
	// writer's pace, not their own.
	Start     int64 `json:"start"`
	Heartbeat int64 `json:"heartbeat"`
	Interval  int64 `json:"interval"`
}

// expires is when e goes stale unless it beats again.
func (e *entry) expires() time.Time {
	iv := e.Interval
	if iv <= 0 {
		iv = DefaultHeartbeat.Milliseconds()
	}
	return time.UnixMilli(e.Heartbeat + staleBeats*iv + 1)
}

// stale reports whether e should be ignored and deleted at now.
func (e *entry) stale(now time.Time, host string) bool {
	if !now.Before(e.expires()) {
		return true
	}
	return e.Host == host && e.PID > 0 && pidDead(e.PID)
}

func pidDead(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// Registry is one embedded registry: what it registered is heartbeaten until
// it is closed.
type Registry struct {
	dir       string
	heartbeat time.Duration
	log       *slog.Logger
	host      string
	pid       int

	mu         sync.Mutex
	closed     bool
	registered map[string]*registration // by file path
	subs       []*subscription
	watcher    *fsnotify.Watcher // lazily, on first Subscribe; nil when unavailable
	watchErr   bool
	stop       chan struct{}
	wg         sync.WaitGroup
}

type registration struct {
	path string
	e    entry
}

var _ extension.Registry = (*Registry)(nil)

// New opens the registry in the existing folder dir with the heartbeat
// interval hb.
func New(dir string, hb time.Duration, log *slog.Logger) *Registry {
	if hb <= 0 {
		hb = DefaultHeartbeat
	}
	if log == nil {
		log = slog.Default()
	}
	host, _ := os.Hostname()
	r := &Registry{
		dir: dir, heartbeat: hb, log: log, host: host, pid: os.Getpid(),
		registered: map[string]*registration{},
		stop:       make(chan struct{}),
	}
	r.wg.Add(1)
	go r.beat()
	return r
}

// Dir is the registry's folder.
func (r *Registry) Dir() string { return r.dir }

// ServiceDir is the folder of the service key key.
func (r *Registry) ServiceDir(key string) string {
	return filepath.Join(r.dir, url.PathEscape(key))
}

// InstanceID is the file name (without extension) of the provider URL u.
func InstanceID(u *kernel.URL) string {
	sum := sha256.Sum256([]byte(u.String()))
	return hex.EncodeToString(sum[:12])
}

func (r *Registry) entryPath(u *kernel.URL) string {
	return filepath.Join(r.ServiceDir(u.ServiceKey()), InstanceID(u)+entryExt)
}

// Register writes u's file; registering the same URL again is harmless.
func (r *Registry) Register(_ context.Context, u *kernel.URL) error {
	if u == nil {
		return errors.New("weft: embedded registry: register a nil URL")
	}
	if extension.IsConsumer(u) {
		return nil // it keeps providers only
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return fmt.Errorf("weft: embedded registry is closed; cannot register %s", u.ServiceKey())
	}
	path := r.entryPath(u)
	reg := r.registered[path]
	if reg == nil {
		now := time.Now().UnixMilli()
		reg = &registration{path: path, e: entry{
			URL: u.String(), Host: r.host, PID: r.pid,
			Start: now, Interval: r.heartbeat.Milliseconds(),
		}}
	}
	if err := r.write(reg); err != nil {
		return fmt.Errorf("weft: embedded registry: register %s: %w", u.ServiceKey(), err)
	}
	r.registered[path] = reg
	return nil
}

// Unregister removes u's file.
func (r *Registry) Unregister(_ context.Context, u *kernel.URL) error {
	if u == nil || extension.IsConsumer(u) {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	path := r.entryPath(u)
	delete(r.registered, path)
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("weft: embedded registry: unregister %s: %w", u.ServiceKey(), err)
	}
	return nil
}

// write refreshes reg's heartbeat and writes its file atomically. r.mu is
// held, so an Unregister cannot race a heartbeat into resurrecting the file.
func (r *Registry) write(reg *registration) error {
	reg.e.Heartbeat = time.Now().UnixMilli()
	data, err := json.Marshal(&reg.e)
	if err != nil {
		return err
	}
	dir := filepath.Dir(reg.path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// The temp name starts with a dot and does not end in .json: readers
	// skip it.
	f, err := os.CreateTemp(dir, "."+strings.TrimSuffix(filepath.Base(reg.path), entryExt)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, reg.path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// beat rewrites every registered file each heartbeat. A file someone deleted
// (it looked stale to them) comes back on the next beat.
func (r *Registry) beat() {
	defer r.wg.Done()
	t := time.NewTicker(r.heartbeat)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		r.mu.Lock()
		for _, reg := range r.registered {
			if err := r.write(reg); err != nil {
				r.log.Warn("weft: embedded registry: heartbeat failed", "file", reg.path, "err", err)
			}
		}
		r.mu.Unlock()
	}
}

// subscription is one listener of one consumer URL.
type subscription struct {
	r        *Registry
	consumer *kernel.URL
	listener extension.NotifyListener
	iface    string
	groups   []string // nil: any group
	version  string   // "*": any version
	wildcard bool     // scans every service folder
	folder   string   // the service folder when !wildcard

	kick    chan struct{}
	stop    chan struct{}
	stopped atomic.Bool

	// mu serialises scans and notifications; last is the list notified.
	mu   sync.Mutex
	last []string
}

// Subscribe notifies listener with the providers of u's service key now,
// then after every change. A consumer group or version of "*" matches any;
// a group may also be a comma-separated list.
func (r *Registry) Subscribe(_ context.Context, u *kernel.URL, listener extension.NotifyListener) error {
	if u == nil || listener == nil {
		return errors.New("weft: embedded registry: subscribe needs a URL and a listener")
	}
	s := &subscription{
		r: r, consumer: u, listener: listener,
		iface:   u.Interface(),
		version: u.Param(kernel.KeyVersion),
		kick:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
	}
	group := u.Param(kernel.KeyGroup)
	switch {
	case group == "*":
		s.wildcard = true
	case strings.Contains(group, ","):
		s.wildcard = true
		for g := range strings.SplitSeq(group, ",") {
			s.groups = append(s.groups, strings.TrimSpace(g))
		}
	default:
		s.groups = []string{group}
	}
	if s.version == "*" {
		s.wildcard = true
	}
	if !s.wildcard {
		s.folder = r.ServiceDir(u.ServiceKey())
	}

	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return fmt.Errorf("weft: embedded registry is closed; cannot subscribe %s", u.ServiceKey())
	}
	r.subs = append(r.subs, s)
	r.ensureWatcherLocked()
	s.watchLocked()
	r.wg.Add(1)
	r.mu.Unlock()

	// The first list is delivered before Subscribe returns; events since the
	// watch was set are queued in s.kick for the loop.
	next := s.scan(true)
	go s.run(next)
	return nil
}

// Unsubscribe stops notifications of listener for u's service key: none
// starts after it returns (one already running may finish).
func (r *Registry) Unsubscribe(_ context.Context, u *kernel.URL, listener extension.NotifyListener) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	kept := r.subs[:0]
	for _, s := range r.subs {
		if sameListener(s.listener, listener) && (u == nil || u.ServiceKey() == s.consumer.ServiceKey()) {
			s.halt()
			continue
		}
		kept = append(kept, s)
	}
	clear(r.subs[len(kept):])
	r.subs = kept
	return nil
}

func sameListener(a, b extension.NotifyListener) bool {
	if a == nil || b == nil {
		return a == b
	}
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	return ta == tb && ta.Comparable() && a == b
}

// Close unregisters everything this registry registered and stops its
// goroutines. It must not be called from a listener's Notify.
func (r *Registry) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	for _, s := range r.subs {
		s.halt()
	}
	r.subs = nil
	close(r.stop)
	w := r.watcher
	r.mu.Unlock()

	var errs []error
	if w != nil {
		errs = append(errs, w.Close())
	}
	r.wg.Wait()

	r.mu.Lock()
	defer r.mu.Unlock()
	for path := range r.registered {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	clear(r.registered)
	return errors.Join(errs...)
}

// ensureWatcherLocked starts the registry's one fsnotify watcher, shared by
// its subscriptions (inotify instances are a scarce per-user resource). When
// it cannot, subscriptions still rescan every heartbeat.
func (r *Registry) ensureWatcherLocked() {
	if r.watcher != nil || r.watchErr {
		return
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		r.watchErr = true
		r.log.Warn("weft: embedded registry: no file watcher; polling every heartbeat", "err", err)
		return
	}
	r.watcher = w
	r.wg.Add(1)
	go r.watch(w)
}

// watch routes file events to the subscriptions of the folder they happen in.
func (r *Registry) watch(w *fsnotify.Watcher) {
	defer r.wg.Done()
	for {
		select {
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			r.route(w, ev)
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			// An overflow loses events; the rescan catches up.
			r.log.Debug("weft: embedded registry: watcher error", "err", err)
		}
	}
}

func (r *Registry) route(w *fsnotify.Watcher, ev fsnotify.Event) {
	base := filepath.Base(ev.Name)
	if strings.HasPrefix(base, ".") {
		return // temp files of an atomic write; the rename is what counts
	}
	dir := filepath.Dir(ev.Name)
	inRoot := dir == r.dir
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	for _, s := range r.subs {
		switch {
		case s.wildcard && inRoot:
			// A new service folder: watch it too.
			if ev.Has(fsnotify.Create) {
				_ = w.Add(ev.Name)
			}
			s.poke()
		case s.wildcard && filepath.Dir(dir) == r.dir:
			s.poke()
		case !s.wildcard && (dir == s.folder || ev.Name == s.folder):
			s.poke()
		}
	}
}

// watchLocked (re)adds the watches s needs; r.mu is held. Called at
// subscription and on every rescan, so a folder removed and recreated is
// watched again.
func (s *subscription) watchLocked() {
	w := s.r.watcher
	if w == nil {
		return
	}
	watched := w.WatchList()
	add := func(p string) {
		if !slices.Contains(watched, p) {
			_ = w.Add(p)
		}
	}
	if !s.wildcard {
		if err := os.MkdirAll(s.folder, 0o755); err == nil {
			add(s.folder)
		}
		return
	}
	add(s.r.dir)
	des, _ := os.ReadDir(s.r.dir)
	for _, de := range des {
		if de.IsDir() {
			add(filepath.Join(s.r.dir, de.Name()))
		}
	}
}

func (s *subscription) poke() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// halt stops s; r.mu is held.
func (s *subscription) halt() {
	if !s.stopped.Swap(true) {
		close(s.stop)
	}
}

// run rescans after a burst of events (coalesced), every heartbeat, and when
// the oldest heartbeat of the providers listed runs out, so a provider that
// stopped beating is dropped about three of its heartbeats after its last.
func (s *subscription) run(next time.Time) {
	defer s.r.wg.Done()
	tick := time.NewTicker(s.r.heartbeat)
	defer tick.Stop()
	burst := time.NewTimer(coalesce)
	burst.Stop()
	defer burst.Stop()
	expiry := time.NewTimer(time.Hour)
	defer expiry.Stop()
	setExpiry := func(next time.Time) {
		d := time.Hour
		if !next.IsZero() {
			d = max(time.Until(next), time.Millisecond)
		}
		expiry.Reset(d)
	}
	setExpiry(next)
	armed := false
	for {
		select {
		case <-s.stop:
			return
		case <-s.kick:
			// Not sliding: a steady stream of events still gets a scan
			// every coalesce interval.
			if !armed {
				burst.Reset(coalesce)
				armed = true
			}
		case <-burst.C:
			armed = false
			setExpiry(s.scan(false))
		case <-expiry.C:
			setExpiry(s.scan(false))
		case <-tick.C:
			s.r.mu.Lock()
			if !s.r.closed {
				s.watchLocked()
			}
			s.r.mu.Unlock()
			setExpiry(s.scan(false))
		}
	}
}

// scan lists the matching providers and notifies when the list changed (or
// always, the first time). It returns when the first listed provider goes
// stale unless it beats again (zero: none listed).
func (s *subscription) scan(first bool) time.Time {
	urls, next := s.list()
	keys := make([]string, len(urls))
	for i, u := range urls {
		keys[i] = u.String()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped.Load() || (!first && slices.Equal(keys, s.last)) {
		return next
	}
	s.last = keys
	s.listener.Notify(urls)
	return next
}

// list reads the provider files s matches, sorted by URL, deleting stale
// ones; next is when the first of them goes stale if it does not beat again.
func (s *subscription) list() (urls []*kernel.URL, next time.Time) {
	var folders []string
	if s.wildcard {
		des, _ := os.ReadDir(s.r.dir)
		for _, de := range des {
			if de.IsDir() {
				// The escaped key contains the escaped interface.
				if name, err := url.PathUnescape(de.Name()); err == nil && !strings.Contains(name, s.iface) {
					continue
				}
				folders = append(folders, filepath.Join(s.r.dir, de.Name()))
			}
		}
	} else {
		folders = []string{s.folder}
	}
	now := time.Now()
	seen := map[string]*kernel.URL{}
	for _, folder := range folders {
		des, err := os.ReadDir(folder)
		if err != nil {
			continue
		}
		for _, de := range des {
			name := de.Name()
			if de.IsDir() || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, entryExt) {
				continue
			}
			path := filepath.Join(folder, name)
			e, ok := readEntry(path)
			if !ok {
				continue // unreadable or garbage: skipped, left alone
			}
			if e.stale(now, s.r.host) {
				s.r.evict(path, now)
				continue
			}
			u, err := kernel.ParseURL(e.URL)
			if err != nil || !s.matches(u) {
				continue
			}
			seen[u.String()] = u
			if exp := e.expires(); next.IsZero() || exp.Before(next) {
				next = exp
			}
		}
	}
	out := make([]*kernel.URL, 0, len(seen))
	for _, u := range seen {
		out = append(out, u)
	}
	slices.SortFunc(out, func(a, b *kernel.URL) int { return strings.Compare(a.String(), b.String()) })
	return out, next
}

func (s *subscription) matches(p *kernel.URL) bool {
	if p.Interface() != s.iface {
		return false
	}
	if s.version != "*" && p.Param(kernel.KeyVersion) != s.version {
		return false
	}
	return s.groups == nil || slices.Contains(s.groups, p.Param(kernel.KeyGroup))
}

func readEntry(path string) (*entry, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, false
	}
	var e entry
	if json.Unmarshal(data, &e) != nil || e.URL == "" || e.Heartbeat == 0 {
		return nil, false
	}
	return &e, true
}

// evict deletes the stale entry at path, after reading it again: its owner
// may have just renewed it. (A renewal between this read and the removal is
// lost until the owner's next heartbeat rewrites the file.)
func (r *Registry) evict(path string, now time.Time) {
	e, ok := readEntry(path)
	if !ok || !e.stale(now, r.host) {
		return
	}
	if err := os.Remove(path); err == nil {
		r.log.Info("weft: embedded registry: removed stale provider", "url", e.URL, "pid", e.PID)
	}
}

var _ extension.Catalog = (*Registry)(nil)

// Providers lists every live provider in the folder, by service key (stale
// entries are skipped and left for a subscriber to evict: a listing
// changes nothing).
func (r *Registry) Providers(ctx context.Context) (map[string][]*kernel.URL, error) {
	des, err := os.ReadDir(r.dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return map[string][]*kernel.URL{}, nil
		}
		return nil, fmt.Errorf("weft: embedded registry %s: %w", r.dir, err)
	}
	now := time.Now()
	out := map[string][]*kernel.URL{}
	for _, de := range des {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if !de.IsDir() {
			continue
		}
		folder := filepath.Join(r.dir, de.Name())
		files, err := os.ReadDir(folder)
		if err != nil {
			continue
		}
		for _, f := range files {
			name := f.Name()
			if f.IsDir() || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, entryExt) {
				continue
			}
			e, ok := readEntry(filepath.Join(folder, name))
			if !ok || e.stale(now, r.host) {
				continue
			}
			u, err := kernel.ParseURL(e.URL)
			if err != nil || u.Protocol == instanceProto {
				continue // application instances are not providers
			}
			out[u.ServiceKey()] = append(out[u.ServiceKey()], u)
		}
	}
	for _, list := range out {
		slices.SortFunc(list, func(a, b *kernel.URL) int { return strings.Compare(a.String(), b.String()) })
	}
	return out, nil
}
