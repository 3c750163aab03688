// Command sharedcount is a weft WASM filter that counts the calls of every
// instance of every filter with its vm_id, through the host's shared data
// (ABI v1.1): a compare-and-swap loop, so that no increment is lost when
// instances race. It sets the attachment x-count to the count it wrote, and
// counts its calls in the metric "requests" too.
package main

import (
	"strconv"

	"github.com/weftrpc/weft/sdk/go/weft"
)

var requests weft.Metric

func init() {
	weft.OnRequest(func(c *weft.Call) weft.Action {
		if requests == 0 {
			m, err := weft.DefineMetric(weft.MetricCounter, "requests")
			if err != nil {
				return c.Reject(weft.CodeUnknown, "sharedcount: "+err.Error())
			}
			requests = m
		}
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
		return weft.Continue
	})
}

func main() {} // never run in a reactor module: handlers register in init
