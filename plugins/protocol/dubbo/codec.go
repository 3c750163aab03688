package dubbo

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/kernel/view"
	"github.com/weftrpc/weft/plugins/serialization/hessian2"
	netty "github.com/weftrpc/weft/transport-netty"
)

// Header layout and flags of the Dubbo protocol.
const (
	HeaderLength = 16
	Magic        = 0xdabb

	FlagRequest = 0x80
	FlagTwoWay  = 0x40
	FlagEvent   = 0x20
	serialMask  = 0x1f

	// DubboVersion is the protocol version a consumer announces.
	DubboVersion = "2.0.2"

	// DefaultPayload is Dubbo's default frame body limit, 8 MiB.
	DefaultPayload = 8 << 20
)

// Response body flags (the first value of an OK response's body).
const (
	ResponseWithException                int32 = 0
	ResponseValue                        int32 = 1
	ResponseNullValue                    int32 = 2
	ResponseWithExceptionWithAttachments int32 = 3
	ResponseValueWithAttachments         int32 = 4
	ResponseNullValueWithAttachments     int32 = 5
)

// RPCRequest is the body of a call: Dubbo's RpcInvocation on the wire.
type RPCRequest struct {
	DubboVersion string
	Path         string
	Version      string
	Method       string
	// ParamTypes is the JVM descriptor of the arguments, "Ljava/lang/String;J".
	ParamTypes  string
	Args        []any
	Attachments map[string]any
	// Fixed are attachments every call of an invoker sends (path,
	// interface, version, group, timeout); Attachments override them. They
	// are kept apart so a call without attachments of its own builds no map.
	Fixed map[string]any
	// Countdown, when > 0, is the milliseconds the consumer still waits for
	// this call; it goes on the wire as Dubbo's `_TO` attachment (an
	// Integer, as Java's enable-timeout-countdown sends it) unless the
	// attachments carry one already.
	Countdown int64
	// Serialization is what the request came in, when not hessian2 (a
	// plugin's): its answer goes back in the same.
	Serialization extension.Serialization

	// frame is the allocation a decoded request lives in, nil for one
	// built otherwise: the provider serves the call from it.
	frame *requestFrame
}

// KeyCountdown is Dubbo's TIMEOUT_ATTACHMENT_KEY: the time the consumer
// still waits, in ms, which a provider bounds the call by.
const KeyCountdown = "_TO"

// RPCResult is the body of an OK response.
type RPCResult struct {
	Value any
	// Exception is a business error raised by the provider.
	Exception error
	// Attachments travel back when the consumer announced a DubboVersion
	// that supports them (2.0.2 and later).
	Attachments map[string]any
	// WithAttachments selects response flags 3/4/5 instead of 0/1/2.
	WithAttachments bool
	// Serialization is what the result is written in, when not hessian2:
	// its request's.
	Serialization extension.Serialization
}

// Codec frames netty.Request and netty.Response values as Dubbo frames with a
// hessian2 body. Payload bounds the body on both encode and decode; a frame
// over it fails that one call and leaves the connection open.
type Codec struct {
	// ser writes requests (the URL's `serialization`); h2 is set when it
	// is hessian2, whose fast paths then apply. byID finds the
	// serialization a peer's frame names by its header's id.
	ser     extension.Serialization
	h2      bool
	hs      *hessian2.Serialization // hessian2, for what is always written in it
	byID    func(id byte) (extension.Serialization, bool)
	payload int
	intern  *hessian2.Interner
	// factor bounds the Go memory a body decodes into: factor × its size
	// plus hessian2.BudgetSlack (hessian2.BudgetFactor unless set).
	factor int
	// pool bounds the memory of the bodies this codec decodes at once
	// (KeyDecodeMemory).
	pool *hessian2.Pool
}

// KeyDecodeMemory is the URL parameter (a protocol's params) that bounds,
// in bytes, the Go memory of all the bodies a protocol decodes at once;
// default DecodeMemoryFactor × payload. Each body is bounded by its own
// budget (decode.factor); this bounds many connections each sending a body
// just under it. A body that finds it used up is answered "server busy"
// (Dubbo status 100), which a consumer retries on another provider.
const KeyDecodeMemory = "decode.memory"

// DecodeMemoryFactor × payload is the default decode.memory: 256 MiB for
// Dubbo's 8 MiB payload.
const DecodeMemoryFactor = 32

// WithDecodeMemory returns c with a shared decode memory of n bytes; n <= 0
// keeps the default.
func (c *Codec) WithDecodeMemory(n int64) *Codec {
	if n > 0 {
		c.pool = hessian2.NewPool(n)
	}
	return c
}

// KeyDecodeFactor is the URL parameter (a protocol's params) that sets
// Codec.factor: how many times its size in Go memory a body may decode into.
// The default (hessian2.BudgetFactor, 12) takes lists of strings and
// numbers of any size; bodies of many small maps or objects, which the
// library decodes into some 23 times their wire size, need more.
const KeyDecodeFactor = "decode.factor"

// WithDecodeFactor returns c with a memory budget of factor × body size (+
// hessian2.BudgetSlack) for decoding; factor <= 0 keeps the default.
func (c *Codec) WithDecodeFactor(factor int) *Codec {
	if factor > 0 {
		c.factor = factor
	}
	return c
}

func (c *Codec) budget(d *hessian2.Decoder) *hessian2.Decoder {
	if c.factor > 0 {
		d.SetBudgetFactor(c.factor)
	}
	d.SetPool(c.pool)
	return d
}

// NewCodec returns a codec whose bodies are limited to payload bytes
// (DefaultPayload when payload <= 0).
func NewCodec(payload int) *Codec {
	if payload <= 0 {
		payload = DefaultPayload
	}
	hs := hessian2.New()
	return &Codec{ser: hs, hs: hs, h2: true, payload: payload, intern: hessian2.NewInterner(4096),
		pool: hessian2.NewPool(int64(DecodeMemoryFactor) * int64(payload))}
}

// WithSerialization returns c writing requests with ser, and reading the
// frames of other serializations with what byID finds for their id (nil:
// hessian2 only). Responses go out in the serialization of their request.
func (c *Codec) WithSerialization(ser extension.Serialization, byID func(id byte) (extension.Serialization, bool)) *Codec {
	if ser != nil {
		c.ser = ser
		c.h2 = ser.ID() == hessian2.ID
	}
	c.byID = byID
	return c
}

// serialization is the one a frame's header names: hessian2, or one byID
// knows.
func (c *Codec) serialization(id byte) (extension.Serialization, bool) {
	if id == hessian2.ID {
		return nil, true // hessian2: the fast paths, no lookup
	}
	if c.byID == nil {
		return nil, false
	}
	return c.byID(id)
}

var _ extension.Codec = (*Codec)(nil)

// ErrPayload is wrapped by errors about frames over the payload limit.
var ErrPayload = errors.New("payload limit exceeded")

// Encode appends msg's frame to dst.
func (c *Codec) Encode(dst []byte, msg any) ([]byte, error) {
	start := len(dst)
	dst = append(dst, make([]byte, HeaderLength)...)
	h := dst[start : start+HeaderLength]
	binary.BigEndian.PutUint16(h, Magic)
	var err error
	switch m := msg.(type) {
	case *netty.Request:
		flag := byte(FlagRequest) | hessian2.ID
		if !m.Event {
			flag = byte(FlagRequest) | c.ser.ID()
		}
		if m.TwoWay {
			flag |= FlagTwoWay
		}
		if m.Event {
			flag |= FlagEvent
		}
		h[2] = flag
		binary.BigEndian.PutUint64(h[4:], m.ID)
		switch d := m.Data.(type) {
		case nil:
			dst = append(dst, 'N')
		case string:
			// An event's data (READONLY's "R"), a Hessian string as
			// Java's ExchangeCodec.encodeEventData writes it.
			if !m.Event {
				return dst[:start], fmt.Errorf("weft: dubbo codec: request data %q is only an event's", d)
			}
			dst = hessian2.AppendString(dst, d)
		case *RPCRequest:
			if c.h2 {
				dst, err = c.encodeRequestBody(dst, d)
			} else {
				dst, err = encodeRequestWith(c.ser, dst, d)
			}
		default:
			return dst[:start], fmt.Errorf("weft: dubbo codec: cannot encode request data %T", m.Data)
		}
	case *netty.Response:
		flag := byte(hessian2.ID)
		if m.Event {
			flag |= FlagEvent
		}
		h[2] = flag
		h[3] = m.Status
		binary.BigEndian.PutUint64(h[4:], m.ID)
		switch {
		case m.Event:
			dst = append(dst, 'N')
		case m.Status != kernel.ResponseOK:
			// Error texts and events go out in hessian2, the header says
			// so: every Dubbo peer reads it.
			dst = hessian2.AppendString(dst, m.ErrMsg)
		default:
			res, _ := m.Data.(*RPCResult)
			if res == nil {
				res = &RPCResult{}
			}
			if ser := res.Serialization; ser != nil && ser.ID() != hessian2.ID {
				h[2] = h[2]&^serialMask | ser.ID()
				dst, err = encodeResultWith(ser, dst, res)
			} else {
				dst, err = c.encodeResult(dst, res)
			}
		}
	default:
		return dst[:start], fmt.Errorf("weft: dubbo codec: cannot encode %T", msg)
	}
	if err != nil {
		return dst[:start], kernel.Wrap(kernel.CodeSerialization, err, "encode dubbo frame")
	}
	n := len(dst) - start - HeaderLength
	if n > c.payload {
		return dst[:start], kernel.Wrap(kernel.CodeSerialization, ErrPayload,
			"frame body of %d bytes exceeds the payload limit of %d bytes; send less or raise `payload` on both sides", n, c.payload)
	}
	binary.BigEndian.PutUint32(dst[start+12:], uint32(n))
	return dst, nil
}

// eventData is an event request's data: netty.ReadOnlyEvent for Dubbo's
// READONLY ("R" as a Hessian string, 0x01 'R'), nil for a heartbeat (its
// body is Hessian null) and for anything else, which is read as a heartbeat
// too, without decoding: an event's body is never a value weft uses.
func eventData(body []byte) any {
	if len(body) == 2 && body[0] == 0x01 && body[1] == netty.ReadOnlyEvent[0] {
		return netty.ReadOnlyEvent
	}
	return nil
}

func (c *Codec) encodeRequestBody(dst []byte, r *RPCRequest) ([]byte, error) {
	start := len(dst)
	v := r.DubboVersion
	if v == "" {
		v = DubboVersion
	}
	desc := r.ParamTypes
	if desc == "" && len(r.Args) > 0 {
		desc = hessian2.Descriptor(r.Args)
	}
	dst = hessian2.AppendString(dst, v)
	dst = hessian2.AppendString(dst, r.Path)
	dst = hessian2.AppendString(dst, r.Version)
	dst = hessian2.AppendString(dst, r.Method)
	dst = hessian2.AppendString(dst, desc)
	head := len(dst)
	var err error
	if len(r.Args) > 0 {
		if dst, err = c.hs.Marshal(dst, r.Args...); err != nil {
			return dst[:start], err
		}
	}
	countdown := r.Countdown > 0
	if countdown {
		if _, set := r.Attachments[KeyCountdown]; set {
			countdown = false
		}
	}
	if out, ok := hessian2.AppendStringMap(dst, r.Fixed, r.Attachments); ok {
		if countdown {
			// Before the map's end marker: one more entry.
			out = hessian2.AppendString(out[:len(out)-1], KeyCountdown)
			out = append(hessian2.AppendInt(out, int32(min(r.Countdown, math.MaxInt32))), 'Z')
		}
		return out, nil
	}
	// Attachments of other types: one stream with the arguments, so that
	// back references stay right.
	att := make(map[string]any, len(r.Fixed)+len(r.Attachments))
	for k, val := range r.Fixed {
		att[k] = val
	}
	for k, val := range r.Attachments {
		att[k] = val
	}
	if countdown {
		att[KeyCountdown] = int32(min(r.Countdown, math.MaxInt32))
	}
	vals := append(append(make([]any, 0, len(r.Args)+1), r.Args...), att)
	return c.hs.Marshal(dst[:head], vals...)
}

func (c *Codec) encodeResult(dst []byte, r *RPCResult) ([]byte, error) {
	att := r.Attachments
	if r.WithAttachments && att == nil {
		att = noAttachments
	}
	switch {
	case r.Exception != nil:
		flag := ResponseWithException
		if r.WithAttachments {
			return c.hs.Marshal(dst, ResponseWithExceptionWithAttachments, hessian2.ExceptionValue(r.Exception), att)
		}
		return c.hs.Marshal(dst, flag, hessian2.ExceptionValue(r.Exception))
	case r.Value == nil:
		if r.WithAttachments {
			return c.hs.Marshal(dst, ResponseNullValueWithAttachments, att)
		}
		return c.hs.Marshal(dst, ResponseNullValue)
	default:
		if r.WithAttachments {
			return c.hs.Marshal(dst, ResponseValueWithAttachments, r.Value, att)
		}
		return c.hs.Marshal(dst, ResponseValue, r.Value)
	}
}

// noAttachments is written for a response without attachments; never
// modified.
var noAttachments = map[string]any{}

// requestFrame and responseFrame put an exchange message and its body in one
// allocation. A decoded request's frame also holds all a provider needs to
// serve it (its arguments, invocation, context and response), so that a
// call's dispatch allocates nothing beyond its decoded values.
type requestFrame struct {
	netty.Request
	body RPCRequest
	args [2]any // the arguments of a call of up to two
	inv  kernel.Invocation
	ctx  kernel.CallContext
	resp responseFrame
	dec  hessian2.Decoder // the body's, used while it is decoded
}

type responseFrame struct {
	netty.Response
	body RPCResult
}

// decodedResponse is a response read by a consumer, with the decoder of
// its body.
type decodedResponse struct {
	responseFrame
	dec hessian2.Decoder
}

// NewResponse returns an OK response carrying a result, allocated together.
func NewResponse() (*netty.Response, *RPCResult) {
	return newResponse(&responseFrame{})
}

func newResponse(f *responseFrame) (*netty.Response, *RPCResult) {
	f.Status = kernel.ResponseOK
	f.Data = &f.body
	return &f.Response, &f.body
}

// skipFactor: a frame over the payload limit is skipped if it is at most
// skipFactor times the limit, and closes its connection beyond.
const skipFactor = 2

// FrameSize tells the whole length of the frame whose header src starts
// with (extension.FrameSizer), 0 while the header is incomplete.
func (c *Codec) FrameSize(src []byte) int {
	if len(src) < HeaderLength {
		return 0
	}
	return HeaderLength + int(binary.BigEndian.Uint32(src[12:]))
}

// PeekRequest recognises a Dubbo request header (extension.RequestPeeker).
func (c *Codec) PeekRequest(first16 []byte) (uint64, bool) {
	if len(first16) < HeaderLength || binary.BigEndian.Uint16(first16) != Magic || first16[2]&FlagRequest == 0 {
		return 0, false
	}
	return binary.BigEndian.Uint64(first16[4:]), true
}

// Decode reads one frame from the front of src.
func (c *Codec) Decode(src []byte) (any, int, error) {
	if len(src) < HeaderLength {
		if len(src) >= 2 && binary.BigEndian.Uint16(src) != Magic {
			return nil, 0, fmt.Errorf("weft: dubbo codec: bad magic 0x%04x, not a Dubbo peer", binary.BigEndian.Uint16(src))
		}
		return nil, 0, nil
	}
	if m := binary.BigEndian.Uint16(src); m != Magic {
		return nil, 0, fmt.Errorf("weft: dubbo codec: bad magic 0x%04x, not a Dubbo peer", m)
	}
	flag, status := src[2], src[3]
	id := binary.BigEndian.Uint64(src[4:])
	bodyLen := int(binary.BigEndian.Uint32(src[12:]))
	isReq := flag&FlagRequest != 0
	if bodyLen < 0 || bodyLen > c.payload {
		err := fmt.Errorf("weft: dubbo frame %d: body of %d bytes exceeds the payload limit of %d bytes; send less or raise `payload` on both sides: %w",
			id, uint32(bodyLen), c.payload, ErrPayload)
		var msg any
		if isReq {
			msg = &netty.Request{ID: id, TwoWay: flag&FlagTwoWay != 0, Event: flag&FlagEvent != 0, Broken: err}
		} else {
			msg = &netty.Response{ID: id, Status: kernel.ResponseBadResponse, ErrMsg: err.Error()}
		}
		// A frame a little over the limit is skipped as its bytes come and
		// the connection lives on. One that claims far more (gigabytes) is
		// more likely a broken or hostile peer than a big call, and may
		// never be sent whole: every later frame would wait behind it, so
		// the connection is closed instead (a consumer reconnects).
		if int64(uint32(bodyLen)) > int64(skipFactor)*int64(c.payload) {
			return nil, 0, &netty.FrameError{Msg: msg, Close: true, Err: err}
		}
		return nil, 0, &netty.FrameError{Msg: msg, Skip: HeaderLength + int(uint32(bodyLen)), Err: err}
	}
	total := HeaderLength + bodyLen
	if len(src) < total {
		return nil, 0, nil
	}
	body := src[HeaderLength:total]
	ser := flag & serialMask
	if isReq {
		f := &requestFrame{}
		req := &f.Request
		req.ID, req.TwoWay, req.Event = id, flag&FlagTwoWay != 0, flag&FlagEvent != 0
		switch {
		case req.Event:
			req.Data = eventData(body)
		case ser != hessian2.ID:
			s, ok := c.serialization(ser)
			if !ok {
				req.Broken = fmt.Errorf("weft: dubbo request %d: serialization id %d is not one this provider has (hessian2 = %d); add its plugin, or call with serialization hessian2", id, ser, hessian2.ID)
				break
			}
			f.body.frame = f
			if err := decodeRequestWith(s, body, &f.body); err != nil {
				req.Broken = fmt.Errorf("weft: dubbo request %d: %w", id, err)
			} else {
				req.Data = &f.body
			}
		default:
			f.body.frame = f
			if err := c.decodeRequestBody(body, &f.body); errors.Is(err, hessian2.ErrBusy) {
				req.Broken = fmt.Errorf("weft: dubbo request %d: %w (%w)", id, netty.ErrServerBusy, err)
			} else if err != nil {
				req.Broken = fmt.Errorf("weft: dubbo request %d: %w", id, err)
			} else {
				req.Data = &f.body
			}
		}
		return req, total, nil
	}
	f := &decodedResponse{}
	resp := &f.Response
	resp.ID, resp.Status, resp.Event = id, status, flag&FlagEvent != 0
	switch {
	case resp.Event:
	case ser != hessian2.ID:
		s, ok := c.serialization(ser)
		switch {
		case !ok:
			resp.Status, resp.ErrMsg = kernel.ResponseBadResponse, fmt.Sprintf("weft: dubbo response %d: serialization id %d is not one this consumer has", id, ser)
		case status != kernel.ResponseOK:
			v, err := s.NewDecoder(body).Decode()
			if str, isStr := v.(string); isStr && err == nil {
				resp.ErrMsg = str
			} else {
				resp.ErrMsg = fmt.Sprintf("status %d with an undecodable message", status)
			}
		default:
			if err := decodeResultWith(s, body, &f.body); err != nil {
				resp.Status, resp.ErrMsg = kernel.ResponseBadResponse, fmt.Sprintf("weft: dubbo response %d: %v", id, err)
			} else {
				resp.Data = &f.body
			}
		}
	case status != kernel.ResponseOK:
		v, err := c.hs.NewDecoder(body).Decode()
		if s, ok := v.(string); ok && err == nil {
			resp.ErrMsg = s
		} else {
			resp.ErrMsg = fmt.Sprintf("status %d with an undecodable message", status)
		}
	default:
		if err := c.decodeResult(body, &f.body, &f.dec); err != nil {
			resp.Status, resp.ErrMsg = kernel.ResponseBadResponse, fmt.Sprintf("weft: dubbo response %d: %v", id, err)
		} else {
			resp.Data = &f.body
		}
	}
	return resp, total, nil
}

func (c *Codec) decodeRequestBody(body []byte, r *RPCRequest) error {
	var d *hessian2.Decoder
	if r.frame != nil {
		d = &r.frame.dec
		d.Reset(body)
		d.SetInterner(c.intern)
	} else {
		d = hessian2.NewInterningDecoder(body, c.intern)
	}
	c.budget(d)
	defer forget(d)
	return readRequest(d, d.DecodeString, d.DecodeStringMap, r)
}

// forget releases d and drops its hold on the body: a decoder kept in a
// frame struct lives as long as the call, and the body is the transport's
// read buffer, a large frame's from a pool (the server's budget for large
// frames counts it free once decoded). Decoded values never alias it.
func forget(d *hessian2.Decoder) {
	d.Release()
	d.Reset(nil)
}

// readRequest reads a request body's header strings (with readStr), its
// arguments and its attachments (with readAtt) from d: what both the
// hessian2 path and a plugin serialization's share.
func readRequest(d extension.Decoder, readStr func() (string, error), readAtt func() (map[string]any, error), r *RPCRequest) error {
	var strs [5]string
	for i := range strs {
		s, err := readStr()
		if err != nil {
			return fmt.Errorf("decode header field %d: %w", i, err)
		}
		strs[i] = s
	}
	*r = RPCRequest{DubboVersion: strs[0], Path: strs[1], Version: strs[2], Method: strs[3], ParamTypes: strs[4], frame: r.frame}
	if r.Method == "" {
		// Found by FuzzDecodeRequestBody: nothing can serve it, so its
		// arguments are not worth decoding.
		return errors.New("the request names no method")
	}
	n, err := hessian2.CountArgs(r.ParamTypes)
	if err != nil {
		return err
	}
	if n > 0 {
		if r.frame != nil && n <= len(r.frame.args) {
			r.Args = r.frame.args[:n:n]
		} else {
			r.Args = make([]any, n)
		}
		for i := range r.Args {
			if r.Args[i], err = d.Decode(); err != nil {
				return fmt.Errorf("decode argument %d of %q: %w", i, view.Cut(r.Method, 200), err)
			}
		}
	}
	att, err := readAtt()
	if err == io.EOF {
		// Dubbo before 2.0.2 could omit attachments.
		return nil
	}
	if err != nil {
		return fmt.Errorf("decode attachments: %w", err)
	}
	r.Attachments = att
	return nil
}

// decodeResult decodes body into r with d, a decoder that Reset makes one
// of body.
func (c *Codec) decodeResult(body []byte, r *RPCResult, d *hessian2.Decoder) error {
	d.Reset(body)
	c.budget(d)
	defer forget(d)
	return readResult(d, d.DecodeStringMap, r)
}

// typed is v as a T when v is a value its serialization decodes only by
// type (kernel.Decodable: protobuf's bytes do not say what they hold), else
// v: the codec knows the types of the header's values, the flag and the
// attachments.
func typed[T any](v any) (any, error) {
	d, ok := v.(kernel.Decodable)
	if !ok {
		return v, nil
	}
	rv, err := d.DecodeAs(reflect.TypeFor[T]())
	if err != nil {
		return nil, err
	}
	return rv.Interface(), nil
}

// readResult reads a result's flag, value or exception and attachments
// from d, the attachments with readAtt: what both the hessian2 path and a
// plugin serialization's share.
func readResult(d extension.Decoder, readAtt func() (map[string]any, error), r *RPCResult) error {
	fv, err := d.Decode()
	if err == nil {
		fv, err = typed[int32](fv)
	}
	if err != nil {
		return fmt.Errorf("decode response flag: %w", err)
	}
	var flag int32
	switch f := fv.(type) {
	case int32:
		flag = f
	case int64:
		flag = int32(f)
	case int:
		flag = int32(f)
	case float64: // a serialization of JSON's numbers
		flag = int32(f)
	default:
		return fmt.Errorf("response flag is %T, want an int", fv)
	}
	switch flag {
	case ResponseWithException, ResponseWithExceptionWithAttachments:
		v, err := d.Decode()
		if err == nil {
			v, err = typed[string](v)
		}
		if err != nil {
			return fmt.Errorf("decode exception: %w", err)
		}
		r.Exception = hessian2.ExceptionError(v)
	case ResponseValue, ResponseValueWithAttachments:
		if r.Value, err = d.Decode(); err != nil {
			return fmt.Errorf("decode value: %w", err)
		}
	case ResponseNullValue, ResponseNullValueWithAttachments:
	default:
		return fmt.Errorf("unknown response flag %d", flag)
	}
	if flag >= ResponseWithExceptionWithAttachments {
		r.WithAttachments = true
		att, err := readAtt()
		if err != nil {
			return fmt.Errorf("decode attachments: %w", err)
		}
		r.Attachments = att
	}
	return nil
}
