package hessian2

import "github.com/weftrpc/weft/extension"

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

// NewDecoder returns a decoder of the values in data, in order. data must
// not change while the decoder is in use; decoded values do not alias it.
func (*Serialization) NewDecoder(data []byte) extension.Decoder { return NewDecoder(data) }
