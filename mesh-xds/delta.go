package xds

import (
	"context"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/code"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/types/known/anypb"
)

// The incremental protocol (delta xDS): the same watches, the same
// decoding and last-good rules, over DeltaAggregatedResources. A request
// says only what changed (names to subscribe and unsubscribe); a response
// carries the resources that changed, each with its version, and the
// names removed. On a new stream every name is subscribed again, with the
// versions of the resources held (initial_resource_versions), since the
// server keeps nothing of the last stream.

// streamDelta runs one delta ADS stream until it fails.
func (c *Client) streamDelta(ctx context.Context) (received bool, err error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(c.conn).DeltaAggregatedResources(sctx)
	if err != nil {
		return false, err
	}
	c.begin(true)
	defer c.stopTimers()
	first := true
	write := func(ctx context.Context) error {
		for {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-c.kick:
			}
			for _, req := range c.dueDelta(first) {
				if first {
					req.Node = c.node
					first = false
				}
				if err := st.Send(req); err != nil {
					return err
				}
			}
		}
	}
	return pump(sctx, cancel, write, func() error {
		resp, err := st.Recv()
		if err == nil {
			c.handleDelta(resp)
		}
		return err
	})
}

// dueDelta builds the delta requests that are due: the first of a stream
// subscribes every name with the versions held; later ones carry the
// changes and answer the last response.
func (c *Client) dueDelta(first bool) []*discoveryv3.DeltaDiscoveryRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*discoveryv3.DeltaDiscoveryRequest
	for _, url := range typeOrder {
		t := c.types[url]
		if !t.send {
			continue
		}
		t.send = false
		req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: t.url}
		for name := range t.subscribe {
			req.ResourceNamesSubscribe = append(req.ResourceNamesSubscribe, name)
			w := t.watches[name]
			if w == nil {
				continue
			}
			if w.has && w.version != "" {
				if req.InitialResourceVersions == nil {
					req.InitialResourceVersions = map[string]string{}
				}
				req.InitialResourceVersions[name] = w.version
			}
			if !w.has && !w.missing && w.timer == nil && c.streaming {
				c.startTimerLocked(t, name, w)
			}
		}
		if !first {
			// Versions go only on a stream's first request.
			req.InitialResourceVersions = nil
		}
		for name := range t.unsubscribe {
			req.ResourceNamesUnsubscribe = append(req.ResourceNamesUnsubscribe, name)
		}
		clear(t.subscribe)
		clear(t.unsubscribe)
		if t.answer {
			req.ResponseNonce = t.nonce
			if t.nack != "" {
				req.ErrorDetail = &statuspb.Status{Code: int32(code.Code_INVALID_ARGUMENT), Message: t.nack}
				t.nack = ""
			}
			t.answer = false
		}
		if req.ResponseNonce == "" && len(req.ResourceNamesSubscribe)+len(req.ResourceNamesUnsubscribe) == 0 {
			continue
		}
		out = append(out, req)
	}
	return out
}

// handleDelta takes a delta response in: its resources (each with a
// version) and the names it removes.
func (c *Client) handleDelta(resp *discoveryv3.DeltaDiscoveryResponse) {
	t := c.responseType(resp.GetTypeUrl())
	if t == nil {
		return
	}
	anys := make([]*anypb.Any, len(resp.GetResources()))
	names := make([]string, len(resp.GetResources()))
	versions := map[string]string{}
	for i, r := range resp.GetResources() {
		anys[i], names[i] = r.GetResource(), r.GetName()
		versions[r.GetName()] = r.GetVersion()
	}
	decoded, _, errs := decodeAll(t, anys, names)
	c.mu.Lock()
	notices := c.applyLocked(t, decoded, versions)
	for _, name := range resp.GetRemovedResources() {
		if w := t.watches[name]; w != nil && w.has {
			notices = append(notices, c.removeLocked(w))
		}
	}
	t.nonce = resp.GetNonce()
	nack := c.answerLocked(t, errs)
	c.mu.Unlock()
	c.after(t, resp.GetSystemVersionInfo(), resp.GetNonce(), nack, notices)
}

// stopTimers stops the not-found timers when a stream ends: they run
// only while connected.
func (c *Client) stopTimers() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.streaming = false
	for _, t := range c.types {
		for _, w := range t.watches {
			if w.timer != nil {
				w.timer.Stop()
				w.timer = nil
			}
		}
	}
}
