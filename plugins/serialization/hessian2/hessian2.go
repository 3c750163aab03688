package hessian2

import (
	"fmt"

	hessian "github.com/apache/dubbo-go-hessian2"

	"github.com/weftrpc/weft/extension"
)

// Name is the extension name under which Dubbo URLs select this
// serialization (serialization=hessian2), and Dubbo's default.
const Name = "hessian2"

// ID is the serialization id that Dubbo puts in the low five bits of the
// header's flag byte for Hessian 2; a peer decodes the body by it.
const ID = 2

// Serialization is the hessian2 extension.Serialization. It holds no state,
// so one value serves every connection.
type Serialization struct{}

var _ extension.Serialization = (*Serialization)(nil)

// New returns the serialization, for the plugin wiring.
func New() *Serialization { return &Serialization{} }

// ID returns 2, which tells the peer how to read the body.
func (*Serialization) ID() byte { return ID }

// Marshal appends to dst the Hessian encodings of values, as one stream: what
// one hessian.Encoder would write encoding them one after another, so class
// definitions and back references are shared across the values. Values of the
// fast types (see the package documentation) are encoded here, and a typical
// request or response allocates nothing but dst's growth; if any value
// contains anything else, the library encodes the whole call. On error dst is
// returned unchanged.
func (*Serialization) Marshal(dst []byte, values ...any) ([]byte, error) {
	e := encoder{b: dst}
	for _, v := range values {
		if !e.value(v) {
			return libMarshal(dst, values)
		}
	}
	return e.b, nil
}

// libMarshal encodes values with the library. Its Encoder writes nothing at all
// for some values it cannot encode (a named string or int64 type, for one),
// which would shift every later value of the body; that is reported instead.
func libMarshal(dst []byte, values []any) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = dst, fmt.Errorf("hessian2: encoder panic: %v", r)
		}
	}()
	enc := hessian.NewEncoder()
	for i, v := range values {
		n := len(enc.Buffer())
		if err := enc.Encode(v); err != nil {
			return dst, fmt.Errorf("hessian2: value %d (%T): %w", i, v, err)
		}
		if len(enc.Buffer()) == n {
			return dst, fmt.Errorf("hessian2: value %d: cannot encode %T", i, v)
		}
	}
	return append(dst, enc.Buffer()...), nil
}

// NewDecoder returns a decoder of the values in data, in order. data must
// not change while the decoder is in use; decoded values do not alias it.
func (*Serialization) NewDecoder(data []byte) extension.Decoder { return NewDecoder(data) }

// RegisterPOJO registers p's Go type under p.JavaClassName() so that objects
// of that Java class decode into it, and it encodes as that class. It is the
// library's own registry, global to the process and shared with any other
// user of github.com/apache/dubbo-go-hessian2 in it (dubbo-go included):
// register at init time, before decoding starts, and one Go type per Java
// class (the library keys its registry by Go type name too).
func RegisterPOJO(p hessian.POJO) { hessian.RegisterPOJO(p) }
