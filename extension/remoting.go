package extension

import (
	"net"
	"time"

	"github.com/weftrpc/weft/kernel"
)

// Default names of the remoting points chosen by name. The transport is
// not one: every protocol's exchange layer (transport-netty) is written on
// its connections, as Dubbo's is on Netty's in practice; there is no second
// transport to choose, and no point declared without one.
const (
	DefaultSerialization = "hessian2"
	DefaultThreadPool    = "fixed"
)

// Channel is one connection, seen from either end.
type Channel interface {
	LocalAddr() net.Addr
	RemoteAddr() net.Addr
	// Send queues msg for the write loop; it does not wait for the flush.
	Send(msg any) error
	Close() error
	IsClosed() bool
}

// ChannelHandler receives a channel's events. Calls for one channel come from
// its read loop, in order.
type ChannelHandler interface {
	Connected(ch Channel)
	Disconnected(ch Channel)
	Received(ch Channel, msg any)
	Caught(ch Channel, err error)
}

// Codec turns messages into frames and back.
type Codec interface {
	// Encode appends msg's frame to dst.
	Encode(dst []byte, msg any) ([]byte, error)
	// Decode reads one message from the front of src. It returns n == 0 and
	// no error when src holds no whole frame yet.
	Decode(src []byte) (msg any, n int, err error)
}

// FrameSizer is a Codec that can tell a frame's whole length from its
// header, so that the transport reads a frame larger than its buffer into
// one buffer of exactly that size. It returns 0 when src holds too little
// to tell.
type FrameSizer interface {
	FrameSize(src []byte) int
}

// RawFramer is a Codec whose protocol builds some messages' frames itself
// (Triple's answers, settings and acknowledgements): RawFrame returns those
// bytes, which the transport then writes or queues as they are instead of
// encoding them into a buffer of its own (a copy per message, and past the
// pooled size a buffer of garbage per large answer). The transport does
// not keep them past the send. ok is false for a message to Encode.
type RawFramer interface {
	RawFrame(msg any) (frame []byte, ok bool)
}

// RequestPeeker is a Codec that recognises the first 16 bytes of one of its
// request frames, so that a TLS server can answer a client that did not
// start TLS in the client's own protocol, saying why, rather than close
// without a word.
type RequestPeeker interface {
	PeekRequest(first16 []byte) (id uint64, ok bool)
}

// Serialization encodes call bodies; its ID goes in the low five bits of the
// Dubbo header's flag byte (hessian2 = 2), and a URL's `serialization`
// chooses it by name. Its Decoder reads bytes from any peer: it must bound
// what they make it allocate and never panic (weft's hessian2 validates a
// body before its library reads it).
type Serialization interface {
	ID() byte
	// Marshal appends the encodings of values to dst.
	Marshal(dst []byte, values ...any) ([]byte, error)
	// NewDecoder reads values one after another from data. data is the
	// transport's buffer, valid only until the frame is handed on: a
	// decoder whose values keep referring to it (decoded lazily, or
	// aliasing its bytes) must copy it.
	NewDecoder(data []byte) Decoder
}

// Serializations are the serializations a program has, for the protocols
// that choose one per call: by the name a URL's `serialization` gives
// (an error listing the names it has), and by the id a peer's
// frame carries.
type Serializations interface {
	Serialization(name string) (Serialization, error)
	ByID(id byte) (Serialization, bool)
}

// Decoder reads serialized values in order.
type Decoder interface {
	Decode() (any, error)
}

// ThreadPool is Dubbo's threadpool extension (`threadpool`: fixed, cached,
// limited, eager): how a provider's server gives its calls threads. Pool
// reads the URL's `threads`, `corethreads`, `queues` and `alive` with the
// pool's own defaults.
type ThreadPool interface {
	Pool(url *kernel.URL) (PoolSpec, error)
}

// PoolSpec is a provider server's pool. A call runs at once while fewer
// than Core run; past that, it waits in a queue of Queues calls if there
// is room (Java's ThreadPoolExecutor), else runs while fewer than Threads
// run, else is answered status 100. Eager pools run a call on a new thread
// up to Threads before queueing it (Dubbo's EagerThreadPool). A worker
// beyond Core retires after idling Alive (0: never).
type PoolSpec struct {
	Threads int
	Core    int
	Queues  int
	Alive   time.Duration
	Eager   bool
}
