package dubbo

import (
	"fmt"
	"math"

	"github.com/weftrpc/weft/extension"
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/kernel/view"
	"github.com/weftrpc/weft/plugins/serialization/hessian2"
)

// Bodies in a serialization other than hessian2 (a plugin's, chosen by a
// URL's `serialization`): the same values in the same order as Java's
// DubboCodec writes them through any ObjectOutput — the Dubbo version, the
// path, the service version, the method, the descriptor, the arguments and
// the attachments; a result's flag, its value or exception, its
// attachments — each through the serialization's Marshal, read back through
// its Decoder. The serialization's decoder is the one that must bound what
// a peer's bytes make it allocate (extension.Serialization).

func encodeRequestWith(ser extension.Serialization, dst []byte, r *RPCRequest) ([]byte, error) {
	v := r.DubboVersion
	if v == "" {
		v = DubboVersion
	}
	desc := r.ParamTypes
	if desc == "" && len(r.Args) > 0 {
		desc = hessian2.Descriptor(r.Args)
	}
	att := make(map[string]any, len(r.Fixed)+len(r.Attachments)+1)
	for k, val := range r.Fixed {
		att[k] = val
	}
	for k, val := range r.Attachments {
		att[k] = val
	}
	if _, set := att[KeyCountdown]; r.Countdown > 0 && !set {
		att[KeyCountdown] = int32(min(r.Countdown, math.MaxInt32))
	}
	vals := make([]any, 0, 6+len(r.Args))
	vals = append(vals, v, r.Path, r.Version, r.Method, desc)
	vals = append(vals, r.Args...)
	return ser.Marshal(dst, append(vals, att)...)
}

func decodeRequestWith(ser extension.Serialization, body []byte, r *RPCRequest) error {
	d := ser.NewDecoder(body)
	readStr := func() (string, error) {
		v, err := d.Decode()
		if err == nil {
			v, err = typed[string](v)
		}
		if err != nil {
			return "", err
		}
		s, ok := v.(string)
		if !ok && v != nil {
			return "", fmt.Errorf("%T, want a string", v)
		}
		return s, nil
	}
	if err := readRequest(d, readStr, func() (map[string]any, error) { return decodeStringMap(d) }, r); err != nil {
		return err
	}
	r.Serialization = ser
	return nil
}

func encodeResultWith(ser extension.Serialization, dst []byte, r *RPCResult) ([]byte, error) {
	att := r.Attachments
	if r.WithAttachments && att == nil {
		att = noAttachments
	}
	var vals []any
	switch {
	case r.Exception != nil:
		// What any serialization can write: the error's text, with its
		// code (kernel.WireText), read back by ExceptionError as a
		// business error.
		vals = []any{int32(ResponseWithException), kernel.WireText(r.Exception)}
	case r.Value == nil:
		vals = []any{int32(ResponseNullValue)}
	default:
		vals = []any{int32(ResponseValue), r.Value}
	}
	if r.WithAttachments {
		vals[0] = vals[0].(int32) + (ResponseValueWithAttachments - ResponseValue)
		vals = append(vals, att)
	}
	return ser.Marshal(dst, vals...)
}

func decodeResultWith(ser extension.Serialization, body []byte, r *RPCResult) error {
	d := ser.NewDecoder(body)
	r.Serialization = ser
	return readResult(d, func() (map[string]any, error) { return decodeStringMap(d) }, r)
}

// decodeStringMap reads the next value as attachments: nil, or a map
// with its keys as strings (view.StringKeys).
func decodeStringMap(d extension.Decoder) (map[string]any, error) {
	v, err := d.Decode()
	if err == nil {
		v, err = typed[map[string]any](v)
	}
	if err != nil {
		return nil, err
	}
	switch m := v.(type) {
	case nil:
		return nil, nil
	case map[string]any:
		return m, nil
	case map[any]any:
		return view.StringKeys(m), nil
	}
	return nil, fmt.Errorf("attachments are %T, want a map", v)
}
