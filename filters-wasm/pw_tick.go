package wasmfilter

import (
	"context"
	"time"
)

// Ticks: a root context that calls proxy_set_tick_period_milliseconds gets
// proxy_on_tick at that period (a weft-ABI guest calling set_tick_period:
// weft_on_tick), as in Envoy, where each worker's VM ticks.
// Here each round of the filter's ticker visits the instances idle at its
// start, coldest first, each taken off the idle stack for its tick and put
// back on top (so that a round visits each once, and calls, which take the
// warmest, are not kept waiting); an instance busy with a call at that
// moment gets the next round's. A tick runs under the filter's timeout and
// a guest that fails in it costs its instance, as a call's callback does.

// minTickPeriod bounds how often a guest can have the host tick it.
const minTickPeriod = 10 * time.Millisecond

// pwSetTickPeriod is proxy_set_tick_period_milliseconds(period): 0 stops the
// ticks.
func pwSetTickPeriod(h *host, in *instance, ctx context.Context, s []uint64) {
	if in == nil {
		s[0] = pwOK
		return
	}
	in.f.setTick(time.Duration(uint32(s[0])) * time.Millisecond)
	s[0] = pwOK
}

func (f *Filter) setTick(d time.Duration) {
	if d > 0 && d < minTickPeriod {
		d = minTickPeriod
	}
	f.tickPeriod.Store(int64(d))
	// Check's filter (tickStop nil) starts instances but never ticks.
	if d > 0 && !f.closed.Load() && f.tickStop != nil {
		f.tickOnce.Do(func() { f.background(f.tickLoop) })
	}
}

func (f *Filter) tickLoop() {
	for {
		d := time.Duration(f.tickPeriod.Load())
		if d <= 0 {
			d = time.Second // stopped: look again now and then
		}
		select {
		case <-f.tickStop:
			return
		case <-time.After(d):
		}
		if f.tickPeriod.Load() <= 0 {
			continue
		}
		v := f.host.cur.Load()
		for n := v.idleCount(); n > 0; n-- {
			in := v.takeColdest()
			if in == nil {
				break
			}
			in.f = f // its root context ticks (vm.go)
			var err error
			if in.pw != nil {
				err = in.pwTick()
			} else if in.onTick != nil {
				_, err = in.call(context.Background(), in.onTick, exportOnTick)
			}
			if err != nil {
				v.discard(in)
				continue
			}
			v.put(in)
		}
	}
}

// pwTick runs proxy_on_tick on the instance, then hands its root context
// the answers of the callouts it made (proxy_http_call, proxy_grpc_call:
// a key set refreshed on a timer), waiting for them up to the filter's
// timeout; the instance is held, and the round's next ticks wait, until
// then. Callouts still out at that bound are cancelled (a warning, not
// the guest's failure); so are those of a filter closing.
func (in *instance) pwTick() error {
	p := in.pw
	p.ctx, p.inTick = context.Background(), true
	defer func() {
		p.inTick = false
		p.end()
	}()
	if _, err := in.pwCall(p.ctx, p.onTick, pwOnTick, in.f.rootCtx); err != nil {
		return err
	}
	if p.pending == 0 {
		return nil
	}
	bound := time.NewTimer(in.f.timeout)
	defer bound.Stop()
	for p.pending > 0 {
		var c *callout
		select {
		case c = <-p.events:
		case <-bound.C:
			in.f.warn(warnCallout, "weft: proxy-wasm filter's callouts from proxy_on_tick did not answer within the filter's timeout; they were cancelled",
				"pending", p.pending, "timeout", in.f.timeout)
			return nil
		case <-in.f.tickStop:
			return nil
		}
		p.pending--
		var err error
		if c.grpc {
			err = in.pwGRPCAnswer(p.ctx, c)
		} else {
			err = in.pwHTTPAnswer(p.ctx, c)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// idleCount is the number of idle instances now.
func (v *version) idleCount() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.idle)
}

// takeColdest takes the idle instance that has been idle longest (the
// bottom of the stack); nil when none is idle.
func (v *version) takeColdest() *instance {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.retired || len(v.idle) == 0 {
		return nil
	}
	in := v.idle[0]
	copy(v.idle, v.idle[1:])
	v.idle[len(v.idle)-1] = nil
	v.idle = v.idle[:len(v.idle)-1]
	return in
}

// stopTicks ends the ticker, if one runs, and waits for its round.
func (f *Filter) stopTicks() {
	if f.tickStop == nil {
		return
	}
	f.queueMu.Lock()
	if !f.bgStopped {
		f.bgStopped = true
		close(f.tickStop)
	}
	f.queueMu.Unlock()
	f.tickWG.Wait()
}

// background runs loop (the ticker, the queue worker) until tickStop; not
// once stopTicks has run, so that Close's wait covers every loop.
func (f *Filter) background(loop func()) {
	f.queueMu.Lock()
	defer f.queueMu.Unlock()
	if f.bgStopped {
		return
	}
	f.tickWG.Add(1)
	go func() {
		defer f.tickWG.Done()
		loop()
	}()
}
