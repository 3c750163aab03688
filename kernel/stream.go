package kernel

import "context"

// StreamKind says how a method's messages flow (gRPC's four kinds).
type StreamKind uint8

const (
	Unary StreamKind = iota
	// ServerStreaming: one request, a stream of answers.
	ServerStreaming
	// ClientStreaming: a stream of requests, one answer.
	ClientStreaming
	// BidiStreaming: both ways at once.
	BidiStreaming
)

// KeyStream is the method-level URL key a provider publishes a streaming
// method's kind under (`<method>.stream=server`), so that a protocol knows
// it from the first frame of a call.
const KeyStream = "stream"

var streamNames = [...]string{"unary", "server", "client", "bidi"}

func (k StreamKind) String() string {
	if int(k) < len(streamNames) {
		return streamNames[k]
	}
	return "unknown"
}

// ParseStreamKind reads a KeyStream value; anything else is Unary.
func ParseStreamKind(s string) StreamKind {
	for i, n := range streamNames {
		if n == s {
			return StreamKind(i)
		}
	}
	return Unary
}

// Stream is a streaming call's flow of messages, as a protocol gives it to
// a provider's method (in the Invocation's arguments) or to a consumer.
// Filters see the call start and end (Invoke and its return) and may wrap
// the stream to see or change each message.
type Stream interface {
	// Context is the call's: it ends with the call's deadline, or when
	// the peer gives up.
	Context() context.Context
	// SendMsg sends one message.
	SendMsg(m any) error
	// RecvMsg decodes the next message into m (a pointer to the
	// method's message type); io.EOF when the peer has sent its last.
	RecvMsg(m any) error
}

// ClientStream is a consumer's end of a streaming call.
type ClientStream interface {
	Stream
	// CloseSend says the consumer sends no more messages.
	CloseSend() error
}

// AttrStream is the invocation attribute with which a consumer asks its
// invoker to open a stream of this kind (a StreamKind) rather than wait for
// one answer; the invoker's Result.Value is then a ClientStream. Protocols
// without streams refuse it.
const AttrStream = "weft.stream"
