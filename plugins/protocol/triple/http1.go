package triple

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	netty "github.com/weftrpc/weft/transport-netty"
)

// Triple's HTTP/1.1 form of a unary call, on the same port as HTTP/2:
//
//	curl -H 'content-type: application/json' -d '["world"]' http://127.0.0.1:50051/org.example.Greeter/sayHello
//
// The body is the call's arguments as a JSON array (one element per
// parameter), or, for a method taking one protobuf message, that message
// in protobuf's JSON form; the answer is the result as JSON.
// Errors come as an HTTP status and {"code": <gRPC status>, "message": ...}.
// Requests on one connection are answered in their order, as HTTP/1.1
// wants, though they are served concurrently.

// maxHTTP1Header bounds a request's line and headers.
const maxHTTP1Header = 16 << 10

// http1Request is one request, split off by the codec.
type http1Request struct {
	method, path string
	headers      map[string]string // lower-case names
	body         []byte            // a copy
	close        bool              // Connection: close, or HTTP/1.0
	bad          string            // why the request cannot be served, if it cannot
	badStatus    int
}

// isHTTP1 reports whether src starts like an HTTP/1.x request: an HTTP/2
// frame we accept starts with 0 (lengths are under 2^16), the preface with
// "PRI * ".
func isHTTP1(src []byte) bool {
	return len(src) > 0 && src[0] >= 'A' && src[0] <= 'Z' && !bytes.HasPrefix(src, []byte("PRI "))
}

// decodeHTTP1 splits one request off src, or asks for more bytes.
func decodeHTTP1(src []byte, maxBody int) (any, int, error) {
	end := bytes.Index(src, []byte("\r\n\r\n"))
	if end < 0 {
		if len(src) > maxHTTP1Header {
			return nil, 0, &netty.FrameError{Close: true, Msg: &http1Request{bad: "request headers over 16 KiB", badStatus: 431},
				Err: fmt.Errorf("weft: triple: HTTP/1.1 request headers over %d bytes", maxHTTP1Header)}
		}
		return nil, 0, nil
	}
	lines := strings.Split(string(src[:end]), "\r\n")
	parts := strings.Split(lines[0], " ")
	if len(parts) != 3 || !strings.HasPrefix(parts[2], "HTTP/1.") {
		err := fmt.Errorf("weft: triple: malformed HTTP/1.1 request line %q (Triple speaks HTTP/2, and HTTP/1.1 for unary JSON calls)", cut(lines[0]))
		if !strings.HasPrefix(parts[len(parts)-1], "HTTP/1.") {
			// No HTTP/1.x version: not HTTP at all (an invalid HTTP/2
			// preface too), so no HTTP answer, only the close.
			return nil, 0, &netty.FrameError{Close: true, Err: err}
		}
		return nil, 0, &netty.FrameError{Close: true, Msg: &http1Request{bad: "malformed request line", badStatus: 400}, Err: err}
	}
	r := &http1Request{method: parts[0], path: parts[1], headers: make(map[string]string, len(lines)), close: parts[2] == "HTTP/1.0"}
	for _, l := range lines[1:] {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			return nil, 0, &netty.FrameError{Close: true, Msg: &http1Request{bad: "malformed header line", badStatus: 400},
				Err: fmt.Errorf("weft: triple: malformed HTTP/1.1 header %q", cut(l))}
		}
		r.headers[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
	}
	if strings.EqualFold(r.headers["connection"], "close") {
		r.close = true
	}
	if te := r.headers["transfer-encoding"]; te != "" {
		return nil, 0, &netty.FrameError{Close: true, Msg: &http1Request{bad: "chunked bodies are not supported: send Content-Length", badStatus: 411},
			Err: fmt.Errorf("weft: triple: HTTP/1.1 Transfer-Encoding %q", cut(te))}
	}
	n := 0
	if cl := r.headers["content-length"]; cl != "" {
		v, err := strconv.Atoi(cl)
		if err != nil || v < 0 {
			return nil, 0, &netty.FrameError{Close: true, Msg: &http1Request{bad: "bad Content-Length", badStatus: 400},
				Err: fmt.Errorf("weft: triple: HTTP/1.1 Content-Length %q", cut(cl))}
		}
		if v > maxBody {
			return nil, 0, &netty.FrameError{Close: true, Msg: &http1Request{bad: fmt.Sprintf("body over the payload limit of %d bytes", maxBody), badStatus: 413},
				Err: fmt.Errorf("weft: triple: HTTP/1.1 body of %d bytes over the payload limit of %d", v, maxBody)}
		}
		n = v
	}
	total := end + 4 + n
	if len(src) < total {
		return nil, 0, nil
	}
	r.body = append([]byte(nil), src[end+4:total]...)
	return r, total, nil
}

// http1Conn orders a connection's HTTP/1.1 answers.
type http1Conn struct {
	mu      sync.Mutex
	next    uint64 // the sequence number of the next request read
	sent    uint64 // the number of answers sent
	pending map[uint64][]byte
}

// deliver sends answer number seq once those before it are out.
func (h *http1Conn) deliver(w wire, seq uint64, answer []byte, closeAfter bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pending == nil {
		h.pending = map[uint64][]byte{}
	}
	h.pending[seq] = answer
	for {
		b, ok := h.pending[h.sent]
		if !ok {
			return
		}
		delete(h.pending, h.sent)
		h.sent++
		w.Send(rawFrames(b))
	}
}

// httpStatusOf maps a gRPC status to the HTTP status of a JSON answer.
func httpStatusOf(grpcStatus int) int {
	switch grpcStatus {
	case statusOK:
		return 200
	case statusInvalidArgument, statusOutOfRange, statusFailedPrecondition:
		return 400
	case statusUnauthenticated:
		return 401
	case statusPermissionDenied:
		return 403
	case statusNotFound, statusUnimplemented:
		return 404
	case statusResourceExhausted:
		return 429
	case statusUnavailable:
		return 503
	case statusDeadlineExceeded:
		return 504
	}
	return 500
}

// http1Answer is an HTTP/1.1 response with a JSON body.
func http1Answer(status int, body []byte, close bool) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", status, statusText(status), len(body))
	if close {
		b.WriteString("Connection: close\r\n")
	}
	b.WriteString("\r\n")
	b.Write(body)
	return b.Bytes()
}

func http1Error(grpcStatus int, msg string, close bool) []byte {
	body, _ := json.Marshal(map[string]any{"code": grpcStatus, "message": msg})
	return http1Answer(httpStatusOf(grpcStatus), body, close)
}

func statusText(s int) string {
	switch s {
	case 200:
		return "OK"
	case 400:
		return "Bad Request"
	case 401:
		return "Unauthorized"
	case 403:
		return "Forbidden"
	case 404:
		return "Not Found"
	case 405:
		return "Method Not Allowed"
	case 411:
		return "Length Required"
	case 413:
		return "Payload Too Large"
	case 415:
		return "Unsupported Media Type"
	case 429:
		return "Too Many Requests"
	case 431:
		return "Request Header Fields Too Large"
	case 503:
		return "Service Unavailable"
	case 504:
		return "Gateway Timeout"
	}
	return "Internal Server Error"
}

// jsonArgs are a JSON call's arguments, decoded once the method's
// parameter types are known (kernel.Decodable).
type jsonArg struct{ raw json.RawMessage }

// DecodeAs decodes the argument into a new value of t: protobuf's JSON
// form for a message, encoding/json for other types.
func (a *jsonArg) DecodeAs(t reflect.Type) (reflect.Value, error) {
	if t.Kind() == reflect.Pointer {
		if m, ok := reflect.New(t.Elem()).Interface().(proto.Message); ok {
			if err := protojson.Unmarshal(a.raw, m); err != nil {
				return reflect.Value{}, fmt.Errorf("JSON of %s: %w", t.Elem(), err)
			}
			return reflect.ValueOf(m), nil
		}
	}
	v := reflect.New(t)
	if err := json.Unmarshal(a.raw, v.Interface()); err != nil {
		return reflect.Value{}, fmt.Errorf("JSON argument as %s: %w", t, err)
	}
	return v.Elem(), nil
}

// Bytes are the argument's JSON (kernel.Encoded).
func (a *jsonArg) Bytes() []byte { return a.raw }

// Encoding says that Bytes are JSON (kernel.Encoded).
func (a *jsonArg) Encoding() string { return "json" }

// jsonArgsOf splits a JSON body into arguments: an array is the argument
// list; any other value is the one argument (a protobuf message in its
// JSON form, which is an object, or a string for StringValue).
func jsonArgsOf(body []byte) ([]any, error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, nil
	}
	if body[0] != '[' {
		if !json.Valid(body) {
			return nil, fmt.Errorf("the body is not JSON: send the arguments as a JSON array, or one protobuf message in its JSON form")
		}
		return []any{&jsonArg{raw: body}}, nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(body, &raws); err != nil {
		return nil, fmt.Errorf("the body is the arguments as a JSON array (or one protobuf message as an object): %w", err)
	}
	args := make([]any, len(raws))
	for i, r := range raws {
		args[i] = &jsonArg{raw: r}
	}
	return args, nil
}

// jsonResult encodes a result: protobuf's JSON form for a message.
func jsonResult(v any) ([]byte, error) {
	if m, ok := v.(proto.Message); ok {
		return protojson.Marshal(m)
	}
	return json.Marshal(v)
}
