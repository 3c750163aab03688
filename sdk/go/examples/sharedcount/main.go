// Command sharedcount is a weft WASM filter that counts the calls of every
// instance of every filter with its vm_id, through the host's shared data
// (ABI v1.1): a compare-and-swap loop, so that no increment is lost when
// instances race. It sets the attachment x-count to the count it wrote and
// x-counted-by to the filter's name (a property), and counts its calls in
// the metric "requests" too. The other v1.1 capabilities, in a few lines
// each: a tick every 20 ms counted in "ticks", and each call enqueued on
// the shared queue "seen", whose items the queue callback counts in
// "dequeued".
package main

import (
	"strconv"

	"github.com/weftrpc/weft/sdk/go/weft"
)

var requests, ticks, dequeued weft.Metric

// define defines the metrics (again: the same ids) in whichever callback
// runs first on this instance.
func define() error {
	for _, m := range []struct {
		m    *weft.Metric
		name string
	}{{&requests, "requests"}, {&ticks, "ticks"}, {&dequeued, "dequeued"}} {
		id, err := weft.DefineMetric(weft.MetricCounter, m.name)
		if err != nil {
			return err
		}
		*m.m = id
	}
	return nil
}

var seen weft.Queue

func init() {
	if err := define(); err == nil {
		weft.SetTickPeriod(20)
		seen, _ = weft.RegisterQueue("seen")
	}
	weft.OnRequest(func(c *weft.Call) weft.Action {
		for {
			v, cas, _ := weft.SharedGet("calls")
			n, _ := strconv.ParseInt(v, 10, 64)
			next := strconv.FormatInt(n+1, 10)
			err := weft.SharedSet("calls", next, cas)
			if err == weft.ErrCasMismatch {
				continue // another instance counted first: read again
			}
			if err != nil {
				return c.Reject(weft.CodeUnknown, "sharedcount: "+err.Error())
			}
			c.SetAttachment("x-count", next)
			// Which filter counted: a property, as proxy-wasm filters read them.
			if name, ok := c.Property("plugin_name"); ok {
				c.SetAttachment("x-counted-by", name)
			}
			break
		}
		requests.Add(1)
		seen.Enqueue("1")
		return weft.Continue
	})
	weft.OnTick(func() { ticks.Add(1) })
	weft.OnQueueReady(func(q weft.Queue) {
		for {
			if _, ok := q.Dequeue(); !ok {
				return
			}
			dequeued.Add(1)
		}
	})
}

func main() {} // never run in a reactor module: handlers register in init
