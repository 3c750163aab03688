package zookeeper

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/weftrpc/weft/kernel"
)

// Dubbo's names and defaults for a ZooKeeper address URL (CommonConstants
// and AbstractZookeeperClient): timeout bounds the first connection (ms),
// session is the session timeout asked of the server (ms; the server
// clamps it to its min/maxSessionTimeout), backup lists more servers.
const (
	DefaultPort      = 2181
	paramTimeout     = "timeout"
	paramSession     = "session"
	paramBackup      = "backup"
	defaultTimeoutMs = 5000
	defaultSessionMs = 60000
)

// Bounds on what is read from ZooKeeper, which is untrusted input: a
// child name is a provider URL (a few KiB with many methods), a document
// a config file.
const (
	maxNodeName = 64 << 10
	maxDocument = 1 << 20
	// logPrefix is how much of a rejected name or document a log line
	// shows.
	logPrefix = 160
)

// client is one ZooKeeper session (go-zookeeper's Conn) shared by a
// registry's or a config center's operations.
type client struct {
	conn  *zk.Conn
	where string // the servers, for messages
	log   *slog.Logger
	acl   []zk.ACL
	// sessions is signalled on every StateHasSession event: ephemerals.keep
	// reads it to notice a new session after an expiry.
	sessions chan struct{}
	zlog     *zkLogger

	// up is closed, and replaced, whenever the connection comes back
	// (see reconnected); under upMu.
	upMu sync.Mutex
	up   chan struct{}

	hadSession atomic.Bool // a session was up and no disconnect was seen since
	everUp     atomic.Bool // a session was up once: later ones are reconnections
	closing    atomic.Bool
}

// servers is the host:port list of an address URL: its address (port 2181
// by default) and the backup parameter's, as Dubbo's URL.getBackupAddress.
func servers(u *kernel.URL) ([]string, error) {
	host := u.Host
	if host == "" {
		host = "127.0.0.1"
	}
	port := u.Port
	if port == 0 {
		port = DefaultPort
	}
	out := []string{net.JoinHostPort(host, strconv.Itoa(port))}
	for _, b := range strings.Split(u.Param(paramBackup), ",") {
		if b = strings.TrimSpace(b); b == "" {
			continue
		}
		h, p, err := net.SplitHostPort(b)
		if err != nil {
			// A backup without a port uses the main address's port, as
			// Dubbo does.
			h, p = strings.Trim(b, "[]"), strconv.Itoa(port)
		}
		if n, err := strconv.Atoi(p); err != nil || n <= 0 || n > 65535 {
			return nil, fmt.Errorf("zookeeper: %s: backup address %q has a bad port", u.Address(), b)
		}
		out = append(out, net.JoinHostPort(h, p))
	}
	return out, nil
}

// dial opens a session with the servers of u and waits, at most u's
// timeout, until the server has granted it. what names the user in
// messages ("registry", "config center").
func dial(u *kernel.URL, log *slog.Logger, what string) (*client, error) {
	if u == nil {
		return nil, fmt.Errorf("zookeeper: nil %s URL", what)
	}
	srvs, err := servers(u)
	if err != nil {
		return nil, err
	}
	where := strings.Join(srvs, ",")
	timeout := u.ParamInt(paramTimeout, defaultTimeoutMs)
	session := u.ParamInt(paramSession, defaultSessionMs)
	if timeout <= 0 || session <= 0 {
		return nil, fmt.Errorf("zookeeper: %s %s: timeout and session must be positive milliseconds (got %d and %d)", what, where, timeout, session)
	}
	c := &client{where: where, log: log, sessions: make(chan struct{}, 1), zlog: &zkLogger{log: log}, up: make(chan struct{})}
	c.acl = zk.WorldACL(zk.PermAll)
	if u.Username != "" {
		// Java's Curator client: digest auth with user:password, and
		// nodes it creates readable and writable by that identity only.
		c.acl = zk.AuthACL(zk.PermAll)
	}
	conn, _, err := zk.Connect(srvs, time.Duration(session)*time.Millisecond,
		zk.WithLogger(c.zlog), zk.WithEventCallback(c.onEvent))
	if err != nil {
		return nil, fmt.Errorf("zookeeper: %s %s: %w", what, where, err)
	}
	c.conn = conn
	deadline := time.NewTimer(time.Duration(timeout) * time.Millisecond)
	defer deadline.Stop()
	for conn.State() != zk.StateHasSession {
		select {
		case <-c.sessions:
		case <-deadline.C:
			c.close()
			cause := "no answer"
			if l := c.zlog.lastFailure(); l != "" {
				cause = l
			}
			return nil, fmt.Errorf("zookeeper: %s: no session with %s within %d ms (%s): check that ZooKeeper runs there and the address (and backup=) is right, or raise the timeout parameter (ms)",
				what, where, timeout, cause)
		}
	}
	if u.Username != "" {
		if err := conn.AddAuth("digest", []byte(u.Username+":"+u.Password)); err != nil {
			c.close()
			return nil, fmt.Errorf("zookeeper: %s %s: digest auth as %q: %w", what, where, u.Username, err)
		}
	}
	log.Info("zookeeper session open", "servers", where, "session", fmt.Sprintf("%#x", conn.SessionID()))
	return c, nil
}

// onEvent runs on go-zookeeper's connection goroutine: it must not block.
func (c *client) onEvent(ev zk.Event) {
	if ev.Type != zk.EventSession || c.closing.Load() {
		return
	}
	switch ev.State {
	case zk.StateHasSession:
		if !c.hadSession.Swap(true) {
			if c.everUp.Swap(true) {
				c.log.Info("zookeeper connection back", "servers", c.where, "via", ev.Server)
			}
			select {
			case c.sessions <- struct{}{}:
			default:
			}
			c.upMu.Lock()
			close(c.up)
			c.up = make(chan struct{})
			c.upMu.Unlock()
		}
	case zk.StateDisconnected:
		if c.hadSession.Swap(false) {
			c.log.Warn("zookeeper connection lost; reconnecting (ephemeral nodes and watches stay while the session lives)", "servers", c.where)
		}
	case zk.StateExpired:
		c.log.Warn("zookeeper session expired: its ephemeral nodes and watches are gone; a new session restores them", "servers", c.where)
	case zk.StateAuthFailed:
		c.log.Error("zookeeper authentication failed", "servers", c.where)
	}
}

// reconnected returns a channel closed when the connection next comes back
// with a session, the same one or a new one. A watcher takes it before it
// arms its watch, and arms a fresh one when it is closed: go-zookeeper
// v1.0.4 hands the server the watches it holds after a reconnect
// (SetWatches) from a goroutine that only logs a failure ("Failed to set
// previous watches"), and after a ZooKeeper restart a watch the server
// never got back never fires, while the client believes it armed. Under
// load, with the server restarted twice in a row, that is what lost the
// consumers' provider watches.
func (c *client) reconnected() <-chan struct{} {
	c.upMu.Lock()
	defer c.upMu.Unlock()
	return c.up
}

func (c *client) close() {
	c.closing.Store(true)
	c.conn.Close()
}

// createParents creates every ancestor of path as a persistent node.
func (c *client) createParents(path string) error {
	for i := 1; i < len(path); i++ {
		if path[i] != '/' {
			continue
		}
		if _, err := c.conn.Create(path[:i], nil, 0, c.acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", path[:i], err)
		}
	}
	return nil
}

// create creates path (with its parents), ephemeral or persistent. An
// ephemeral node that exists already and belongs to another session (an
// expired one the server has not removed yet, or an earlier run of this
// provider) is replaced, as Dubbo's Curator client does.
func (c *client) create(path string, data []byte, ephemeral bool) error {
	var flags int32
	if ephemeral {
		flags = zk.FlagEphemeral
	}
	for attempt := 0; ; attempt++ {
		_, err := c.conn.Create(path, data, flags, c.acl)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, zk.ErrNoNode) && attempt < 3:
			if err := c.createParents(path); err != nil {
				return err
			}
		case errors.Is(err, zk.ErrNodeExists) && attempt < 3:
			if !ephemeral {
				return nil
			}
			_, st, err := c.conn.Exists(path)
			if err != nil {
				return fmt.Errorf("stat %s: %w", path, err)
			}
			if st != nil && st.EphemeralOwner == c.conn.SessionID() {
				return nil
			}
			if err := c.conn.Delete(path, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
				return fmt.Errorf("replace %s (left by session %#x): %w", path, st.EphemeralOwner, err)
			}
		default:
			return fmt.Errorf("create %s: %w", path, err)
		}
	}
}

// zkLogger sends go-zookeeper's messages to slog at debug level (it logs
// every connect attempt) and keeps the last connection failure, which is
// the cause a failed dial reports.
type zkLogger struct {
	log  *slog.Logger
	last atomic.Pointer[string]
}

func (l *zkLogger) Printf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if strings.HasPrefix(msg, "failed to connect") || strings.HasPrefix(msg, "authentication failed") {
		l.last.Store(&msg)
	}
	l.log.Debug("go-zookeeper: " + msg)
}

func (l *zkLogger) lastFailure() string {
	if p := l.last.Load(); p != nil {
		return *p
	}
	return ""
}

// follow keeps one watch armed until stop or quit is closed. read reads
// the watched node again, tells the listeners and arms a new watch,
// returning its channel; follow calls it after every firing of the watch
// armed last (ch) and after every reconnect (up, see reconnected), so that
// whatever the server lost meanwhile, the watch is armed again once the
// connection is back. A read that fails is retried, backing off, until one
// succeeds. what names the watch in messages ("provider watch").
func (c *client) follow(what, node string, stop, quit, up <-chan struct{}, ch <-chan zk.Event, read func() (<-chan zk.Event, error)) {
	for {
		select {
		case <-stop:
			return
		case <-quit:
			return
		case <-up:
			c.log.Debug("zookeeper connection back: reading and arming the "+what+" again", "node", node)
		case ev := <-ch:
			if ev.Type == zk.EventNotWatching && errors.Is(ev.Err, zk.ErrClosing) {
				return
			}
			if ev.Type == zk.EventNotWatching {
				c.log.Info(what+" lost with the session; watching again", "node", node, "err", ev.Err)
			}
		}
		var wait time.Duration
		for {
			// Taken before the read: a reconnect during or after it
			// makes the loop read again.
			up = c.reconnected()
			next, err := read()
			if err == nil {
				ch = next
				break
			}
			if errors.Is(err, zk.ErrClosing) {
				return
			}
			wait = backoff(wait)
			c.log.Debug(what+": read failed; retrying", "node", node, "err", err, "in", wait)
			// A reconnect ends the wait: the read that failed while the
			// server was away (up to 5 s of backoff) goes again at once,
			// so that a watch is armed as soon as there is a server to
			// arm it with.
			if !sleep(wait, stop, quit, up) {
				return
			}
		}
	}
}

// backoff is the wait before the next attempt of a watch that failed to
// re-arm: doubling from 100 ms to 5 s.
func backoff(d time.Duration) time.Duration {
	if d == 0 {
		return 100 * time.Millisecond
	}
	if d *= 2; d > 5*time.Second {
		return 5 * time.Second
	}
	return d
}

// sleep waits d, or until wake is closed (nil: never), or until one of
// the stop channels is closed; false if stopped.
func sleep(d time.Duration, stop1, stop2, wake <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-wake:
		return true
	case <-stop1:
		return false
	case <-stop2:
		return false
	}
}

// clip is s cut for a log line: a hostile name is not echoed whole.
func clip(s string) string {
	if len(s) <= logPrefix {
		return s
	}
	return s[:logPrefix] + "…(" + strconv.Itoa(len(s)) + " bytes)"
}
