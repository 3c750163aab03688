package proxy

import (
	"context"
	"reflect"

	"github.com/weftrpc/weft/kernel"
)

// The typed ends of a provider's streaming method. A method is streaming
// when one of its parameters is one of them:
//
//	func (s *Svc) List(ctx context.Context, in *pb.ListRequest, out *proxy.ServerStream[*pb.Item]) error
//	func (s *Svc) Upload(ctx context.Context, in *proxy.ClientStream[*pb.Chunk]) (*pb.Summary, error)
//	func (s *Svc) Chat(ctx context.Context, st *proxy.BidiStream[*pb.Msg, *pb.Msg]) error
//
// Returning ends the call: nil with status OK, an error with its code.

// ServerStream sends a server-streaming method's answers.
type ServerStream[Out any] struct{ s kernel.Stream }

// Send sends one answer.
func (s *ServerStream[Out]) Send(m Out) error { return s.s.SendMsg(m) }

// Context is the call's.
func (s *ServerStream[Out]) Context() context.Context { return s.s.Context() }

func (*ServerStream[Out]) streamKind() kernel.StreamKind { return kernel.ServerStreaming }
func (s *ServerStream[Out]) bind(st kernel.Stream)       { s.s = st }

// ClientStream receives a client-streaming method's requests.
type ClientStream[In any] struct{ s kernel.Stream }

// Recv returns the next request; io.EOF after the last.
func (s *ClientStream[In]) Recv() (In, error) { return recv[In](s.s) }

// Context is the call's.
func (s *ClientStream[In]) Context() context.Context { return s.s.Context() }

func (*ClientStream[In]) streamKind() kernel.StreamKind { return kernel.ClientStreaming }
func (s *ClientStream[In]) bind(st kernel.Stream)       { s.s = st }

// BidiStream is both ends of a bidirectional method.
type BidiStream[In, Out any] struct{ s kernel.Stream }

// Recv returns the next request; io.EOF after the last.
func (s *BidiStream[In, Out]) Recv() (In, error) { return recv[In](s.s) }

// Send sends one answer.
func (s *BidiStream[In, Out]) Send(m Out) error { return s.s.SendMsg(m) }

// Context is the call's.
func (s *BidiStream[In, Out]) Context() context.Context { return s.s.Context() }

func (*BidiStream[In, Out]) streamKind() kernel.StreamKind { return kernel.BidiStreaming }
func (s *BidiStream[In, Out]) bind(st kernel.Stream)       { s.s = st }

// streamEnd is what the typed ends have in common.
type streamEnd interface {
	streamKind() kernel.StreamKind
	bind(kernel.Stream)
}

var streamEndType = reflect.TypeOf((*streamEnd)(nil)).Elem()

// recv decodes the next message into a new In (a pointer type).
func recv[In any](s kernel.Stream) (In, error) {
	var m In
	t := reflect.TypeOf(&m).Elem()
	if t.Kind() == reflect.Pointer {
		m = reflect.New(t.Elem()).Interface().(In)
		err := s.RecvMsg(m)
		return m, err
	}
	err := s.RecvMsg(&m)
	return m, err
}

// streamKindOf is the kind of a method with these parameters (after ctx),
// and where its stream parameter is; Unary and -1 when it has none.
func streamKindOf(in []reflect.Type) (kernel.StreamKind, int) {
	for i, t := range in {
		if t.Kind() == reflect.Pointer && t.Implements(streamEndType) {
			return reflect.New(t.Elem()).Interface().(streamEnd).streamKind(), i
		}
	}
	return kernel.Unary, -1
}

// bindStream makes the typed end of type t over st.
func bindStream(st kernel.Stream, t reflect.Type) reflect.Value {
	v := reflect.New(t.Elem())
	v.Interface().(streamEnd).bind(st)
	return v
}

// The typed ends of a consumer's streaming call. A stub's func field is a
// streaming call when it returns one of them:
//
//	List func(ctx context.Context, in *pb.ListRequest) (*proxy.ServerStreamClient[*pb.Item], error)
//	Upload func(ctx context.Context) (*proxy.ClientStreamClient[*pb.Chunk, *pb.Summary], error)
//	Chat func(ctx context.Context) (*proxy.BidiStreamClient[*pb.Msg, *pb.Msg], error)
//
// The call opens when the func returns; the context bounds the whole
// stream (its deadline, or the reference's timeout).

// ServerStreamClient receives a server-streaming call's answers.
type ServerStreamClient[Out any] struct{ s kernel.ClientStream }

// Recv returns the next answer; io.EOF after the last (the call ended
// well), or the call's error.
func (s *ServerStreamClient[Out]) Recv() (Out, error) { return recv[Out](s.s) }

// Context is the call's.
func (s *ServerStreamClient[Out]) Context() context.Context { return s.s.Context() }

func (*ServerStreamClient[Out]) clientKind() kernel.StreamKind       { return kernel.ServerStreaming }
func (s *ServerStreamClient[Out]) bindClient(st kernel.ClientStream) { s.s = st }

// ClientStreamClient sends a client-streaming call's requests and receives
// its one answer.
type ClientStreamClient[In, Out any] struct{ s kernel.ClientStream }

// Send sends one request.
func (s *ClientStreamClient[In, Out]) Send(m In) error { return s.s.SendMsg(m) }

// CloseAndRecv says the last request was sent and returns the answer.
func (s *ClientStreamClient[In, Out]) CloseAndRecv() (Out, error) {
	if err := s.s.CloseSend(); err != nil {
		var zero Out
		return zero, err
	}
	return recv[Out](s.s)
}

// Context is the call's.
func (s *ClientStreamClient[In, Out]) Context() context.Context { return s.s.Context() }

func (*ClientStreamClient[In, Out]) clientKind() kernel.StreamKind       { return kernel.ClientStreaming }
func (s *ClientStreamClient[In, Out]) bindClient(st kernel.ClientStream) { s.s = st }

// BidiStreamClient is a consumer's end of a bidirectional call.
type BidiStreamClient[In, Out any] struct{ s kernel.ClientStream }

// Send sends one request.
func (s *BidiStreamClient[In, Out]) Send(m In) error { return s.s.SendMsg(m) }

// Recv returns the next answer; io.EOF after the last.
func (s *BidiStreamClient[In, Out]) Recv() (Out, error) { return recv[Out](s.s) }

// CloseSend says the last request was sent.
func (s *BidiStreamClient[In, Out]) CloseSend() error { return s.s.CloseSend() }

// Context is the call's.
func (s *BidiStreamClient[In, Out]) Context() context.Context { return s.s.Context() }

func (*BidiStreamClient[In, Out]) clientKind() kernel.StreamKind       { return kernel.BidiStreaming }
func (s *BidiStreamClient[In, Out]) bindClient(st kernel.ClientStream) { s.s = st }

type clientEnd interface {
	clientKind() kernel.StreamKind
	bindClient(kernel.ClientStream)
}

var clientEndType = reflect.TypeOf((*clientEnd)(nil)).Elem()
