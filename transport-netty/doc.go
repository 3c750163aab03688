// Package netty is weft's Netty-style transport and Dubbo's exchange layer.
//
// The transport (Transporter, Server, Channel) moves frames over TCP; the
// codec is the protocol's (extension.Codec). What a call costs on a busy
// machine is mostly hand-offs between goroutines (each a wake-up, often of
// another thread) and write system calls (on loopback each also runs the
// receiver's TCP input), so the paths are built to need as few of both as
// the load allows:
//
//   - Writes. A sender encodes on its own goroutine. When nothing else is
//     about to be sent on the connection (one call at a time), it writes its
//     frame itself, without blocking: what the socket does not take goes to
//     the write loop, so no caller waits on a peer that does not read. When
//     more frames are coming (other calls in flight; Conn.coming), it queues
//     the frame for the write loop, which yields once before writing so that
//     the frames of the goroutines about to send go out in the same system
//     call; and the last of them (a server's answer to the last call of a
//     batch) writes what is queued along with its own, without waiting for
//     the write loop's turn. A stream's messages (SendMore) always go to
//     the write loop, which writes those sent while it woke together, as
//     grpc-go's loopy writer does: one system call for many messages.
//   - Buffers. Encode buffers, and the read buffers of frames larger than a
//     connection's 64 KiB one, come from pools by size class (four per power
//     of two, 4 KiB to 16 MiB; buffers.go); an encode buffer is one of the
//     size of the connection's last frame when the pool has one: a large
//     message makes no garbage of its size per call but the values decoded
//     from it. A read buffer is charged to a server's budget for large
//     frames at its class's exact capacity.
//   - Reads. Each connection has a read loop that decodes frames and hands
//     them to a ChannelHandler. The exchange server serves the last call of
//     what was read on the read loop itself (Inliner): nothing is buffered
//     behind it, and the hand-off to a worker was a thread wake-up per call
//     on a quiet connection. A call that outlasts inlineBudget does not hold
//     the connection: a new read loop takes over the drained buffer. The
//     timer that watches the budget is armed once per budget while calls
//     come back to back, not per call: a timer set earlier than any other
//     wakes the network poller's thread, a system call and a context
//     switch.
//
// The exchange layer (Request, Response, ExchangeClient, ExchangeServer)
// correlates requests and responses by id, bounds every call by its deadline,
// answers and sends heartbeats, closes idle connections and reconnects; its
// server serves at most `threads` calls at once, inline or on its pool, and
// answers status 100 beyond.
package netty
