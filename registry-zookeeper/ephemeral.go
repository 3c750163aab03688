package zookeeper

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// ephemerals are the ephemeral nodes a client's session holds for its
// owner (the registry's URLs, the discovery's instances), kept so that they
// can be written again: when a session expires the server deletes its
// ephemeral nodes, and go-zookeeper goes on with a new session without
// them.
type ephemerals[V any] struct {
	c *client
	// noun names the nodes in messages ("URLs", "instances").
	noun string
	// write creates the node path holding v, or updates it.
	write func(path string, v V) error

	// mu serialises the node writes (put, remove and restore), so that a
	// restore never revives a node remove just deleted.
	mu      sync.Mutex
	session int64        // the session the nodes were written in
	nodes   map[string]V // by path
}

func newEphemerals[V any](c *client, noun string, write func(path string, v V) error) *ephemerals[V] {
	return &ephemerals[V]{c: c, noun: noun, write: write, session: c.conn.SessionID(), nodes: map[string]V{}}
}

// put writes path's node and keeps it for restore.
func (e *ephemerals[V]) put(path string, v V) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.write(path, v); err != nil {
		return err
	}
	e.nodes[path] = v
	return nil
}

// remove forgets path's node and deletes it (gone already is no error).
func (e *ephemerals[V]) remove(path string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.nodes, path)
	if err := e.c.conn.Delete(path, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("delete %s at %s: %w", path, e.c.where, err)
	}
	return nil
}

// keep writes the nodes again whenever the client has a new session (the
// old one expired, taking them with it), retrying every second until they
// are all back, until stop is closed.
func (e *ephemerals[V]) keep(stop <-chan struct{}) {
	var retry <-chan time.Time
	for {
		select {
		case <-stop:
			return
		case <-e.c.sessions:
		case <-retry:
		}
		retry = nil
		if !e.restore() {
			retry = time.After(time.Second)
		}
	}
}

// restore writes every node again if the session changed; false if some
// failed (restore runs again).
func (e *ephemerals[V]) restore() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	sid := e.c.conn.SessionID()
	if e.c.conn.State() != zk.StateHasSession || sid == e.session {
		return true
	}
	paths := slices.Sorted(maps.Keys(e.nodes))
	e.c.log.Warn("new zookeeper session: registering the "+e.noun+" again", "servers", e.c.where, "session", fmt.Sprintf("%#x", sid), "nodes", len(paths))
	var errs []error
	for _, p := range paths {
		if err := e.write(p, e.nodes[p]); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		e.c.log.Warn("registering the "+e.noun+" again failed; retrying in 1 s", "servers", e.c.where, "failed", len(errs), "err", errors.Join(errs...))
		return false
	}
	e.session = sid
	return true
}
