package kernel

import (
	"context"
	"sync"
	"time"
)

// WithDeadline is context.WithDeadline for the provider's dispatch path: a
// context whose deadline is known to everyone who asks (Deadline, Err) but
// whose timer starts only when someone waits on Done. Most calls finish
// without anything waiting on Done, and context.WithDeadline's timer and
// cancellation plumbing cost three allocations per call; this costs one.
// The release function must be called when the call ends.
func WithDeadline(parent context.Context, d time.Time) (context.Context, func()) {
	c := &lazyDeadline{Context: parent, deadline: d}
	return c, c.release
}

type lazyDeadline struct {
	context.Context // the parent: values, and its own cancellation (see Done)
	deadline        time.Time

	mu       sync.Mutex
	done     chan struct{}
	timer    *time.Timer
	released bool
	err      error
}

func (c *lazyDeadline) Deadline() (time.Time, bool) {
	if pd, ok := c.Context.Deadline(); ok && (c.deadline.IsZero() || pd.Before(c.deadline)) {
		return pd, true
	}
	return c.deadline, !c.deadline.IsZero()
}

// Done makes the channel and starts the timer on first use.
func (c *lazyDeadline) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done != nil {
		return c.done
	}
	c.done = make(chan struct{})
	wait := time.Until(c.deadline)
	switch {
	case c.released:
		c.closeLocked(context.Canceled)
	case !c.deadline.IsZero() && wait <= 0:
		c.closeLocked(context.DeadlineExceeded)
	default:
		if !c.deadline.IsZero() {
			c.timer = time.AfterFunc(wait, func() { c.expire(context.DeadlineExceeded) })
		}
		if pd := c.Context.Done(); pd != nil {
			// A parent that can end on its own (rare on this path) is
			// watched until this context ends.
			go func(done chan struct{}) {
				select {
				case <-pd:
					c.expire(c.Context.Err())
				case <-done:
				}
			}(c.done)
		}
	}
	return c.done
}

func (c *lazyDeadline) expire(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.closeLocked(err)
	}
}

func (c *lazyDeadline) closeLocked(err error) {
	c.err = err
	close(c.done)
	if c.timer != nil {
		c.timer.Stop()
	}
}

// Err is consistent with Done: once a channel exists it says what closed
// it; before, nobody can be waiting, and the clock (and the parent) decide.
func (c *lazyDeadline) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done != nil || c.err != nil {
		return c.err
	}
	if c.released {
		return context.Canceled
	}
	if err := c.Context.Err(); err != nil {
		return err
	}
	if !c.deadline.IsZero() && !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

func (c *lazyDeadline) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.released = true
	if c.done != nil && c.err == nil {
		c.closeLocked(context.Canceled)
	}
}

// CallContext is a provider call's context as a value that a protocol embeds
// in the allocation it makes per request anyway: it carries the invocation
// (InvocationFrom) and, when Start is given one, the call's deadline (as
// WithDeadline: a timer only if something waits on Done). A provider's call
// context then costs no allocation of its own, where WithDeadline plus
// WithInvocation cost two.
type CallContext struct {
	lazyDeadline
	inv   *Invocation
	timed bool // Start was given a deadline, or StartCancelable called
}

// Start makes c the context of inv under parent, bounded by d unless d is
// zero, and returns it. Release must be called when the call ends; a
// CallContext is started once.
func (c *CallContext) Start(parent context.Context, inv *Invocation, d time.Time) context.Context {
	c.Context, c.deadline, c.inv, c.timed = parent, d, inv, !d.IsZero()
	return c
}

// StartCancelable is Start for a call its peer may give up on (an HTTP/2
// stream reset): Cancel may then end it from another goroutine. d may be
// zero (no deadline).
func (c *CallContext) StartCancelable(parent context.Context, inv *Invocation, d time.Time) context.Context {
	c.Context, c.deadline, c.inv, c.timed = parent, d, inv, true
	return c
}

// Cancel ends a call started with StartCancelable before it returns: Done
// closes, Err says Canceled. It is safe while the call runs, and after.
func (c *CallContext) Cancel() { c.release() }

// Release ends the call: Done (if anyone asked for it) closes, Err says
// Canceled.
func (c *CallContext) Release() {
	if c.timed {
		c.release()
	}
}

func (c *CallContext) Value(k any) any {
	if _, ok := k.(invocationKey); ok {
		return c.inv
	}
	return c.Context.Value(k)
}

func (c *CallContext) Deadline() (time.Time, bool) {
	if !c.timed {
		return c.Context.Deadline()
	}
	return c.lazyDeadline.Deadline()
}

func (c *CallContext) Done() <-chan struct{} {
	if !c.timed {
		return c.Context.Done()
	}
	return c.lazyDeadline.Done()
}

func (c *CallContext) Err() error {
	if !c.timed {
		return c.Context.Err()
	}
	return c.lazyDeadline.Err()
}
