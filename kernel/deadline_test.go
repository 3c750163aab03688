package kernel

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestWithDeadlineLazy(t *testing.T) {
	d := time.Now().Add(50 * time.Millisecond)
	ctx, release := WithDeadline(context.Background(), d)
	if got, ok := ctx.Deadline(); !ok || !got.Equal(d) {
		t.Fatalf("deadline %v %v", got, ok)
	}
	if ctx.Err() != nil {
		t.Fatal("ended early")
	}
	start := time.Now()
	<-ctx.Done()
	if took := time.Since(start); took < 40*time.Millisecond || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("done after %v, err %v", took, ctx.Err())
	}
	release()
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("err after release %v", ctx.Err())
	}

	// Without anyone waiting, the clock decides; Done made late is closed.
	ctx, release = WithDeadline(context.Background(), time.Now().Add(time.Millisecond))
	time.Sleep(5 * time.Millisecond)
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("err %v", ctx.Err())
	}
	select {
	case <-ctx.Done():
	default:
		t.Fatal("Done not closed after the deadline")
	}
	release()

	// Release ends waiters; a derived context follows.
	ctx, release = WithDeadline(context.Background(), time.Now().Add(time.Hour))
	child, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	release()
	select {
	case <-child.Done():
	case <-time.After(time.Second):
		t.Fatal("child not cancelled by release")
	}
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Fatalf("err %v", ctx.Err())
	}

	// A parent's cancellation reaches a waiter.
	parent, pcancel := context.WithCancel(context.Background())
	ctx, release = WithDeadline(parent, time.Now().Add(time.Hour))
	defer release()
	done := ctx.Done()
	pcancel()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("parent cancellation not seen")
	}
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Fatalf("err %v", ctx.Err())
	}
}

func TestWithDeadlineAllocatesOnce(t *testing.T) {
	d := time.Now().Add(time.Hour)
	n := testing.AllocsPerRun(100, func() {
		ctx, release := WithDeadline(context.Background(), d)
		ctx.Deadline()
		_ = ctx.Err()
		release()
	})
	if n > 1 {
		t.Fatalf("%v allocations", n)
	}
}

func TestCallContext(t *testing.T) {
	type key struct{}
	parent := context.WithValue(context.Background(), key{}, "parent's")
	inv := NewInvocation("m")

	// Untimed: the parent's deadline (none), Done and Err; the invocation
	// and the parent's values.
	var cc CallContext
	ctx := cc.Start(parent, inv, time.Time{})
	if got, ok := InvocationFrom(ctx); !ok || got != inv {
		t.Fatalf("invocation %v %v", got, ok)
	}
	if ctx.Value(key{}) != "parent's" {
		t.Fatal("parent's value lost")
	}
	if _, ok := ctx.Deadline(); ok || ctx.Done() != nil || ctx.Err() != nil {
		t.Fatal("an untimed call context has a deadline")
	}
	cc.Release()

	// Timed: as WithDeadline, and Release cancels.
	var tc CallContext
	d := time.Now().Add(20 * time.Millisecond)
	ctx = tc.Start(parent, inv, d)
	if got, ok := ctx.Deadline(); !ok || !got.Equal(d) {
		t.Fatalf("deadline %v %v", got, ok)
	}
	<-ctx.Done()
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("err %v", ctx.Err())
	}
	var rc CallContext
	ctx = rc.Start(parent, inv, time.Now().Add(time.Hour))
	done := ctx.Done()
	rc.Release()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("Release did not close Done")
	}
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Fatalf("err after release %v", ctx.Err())
	}
	if got, _ := InvocationFrom(ctx); got != inv {
		t.Fatal("invocation lost")
	}
}

// TestCallContextCancel: a call started cancelable ends when its peer gives
// up, with or without a deadline, whether Done was asked for before or
// after.
func TestCallContextCancel(t *testing.T) {
	for _, d := range []time.Time{{}, time.Now().Add(time.Hour)} {
		var early, late CallContext
		ctx := early.StartCancelable(context.Background(), nil, d)
		if _, ok := ctx.Deadline(); ok != !d.IsZero() {
			t.Fatalf("deadline %v: Deadline says %v", d, ok)
		}
		done := ctx.Done()
		if ctx.Err() != nil {
			t.Fatal(ctx.Err())
		}
		early.Cancel()
		select {
		case <-done:
		case <-time.After(time.Second):
			t.Fatal("Done did not close on Cancel")
		}
		if ctx.Err() != context.Canceled {
			t.Fatalf("Err %v, want Canceled", ctx.Err())
		}
		ctx = late.StartCancelable(context.Background(), nil, d)
		late.Cancel()
		if ctx.Err() != context.Canceled {
			t.Fatalf("Err %v before Done, want Canceled", ctx.Err())
		}
		<-ctx.Done()
		early.Release()
		late.Release()
	}
}
