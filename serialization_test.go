package weft_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftrpc/weft"
	"github.com/weftrpc/weft/extension"
)

// lineJSON is a Serialization a program adds as a plugin: each value a line
// of JSON. Its id is Dubbo's fastjson's (6), which no built-in has.
type lineJSON struct{ marshals, decodes *atomic.Int64 }

func (lineJSON) ID() byte { return 6 }

func (s lineJSON) Marshal(dst []byte, values ...any) ([]byte, error) {
	s.marshals.Add(1)
	for _, v := range values {
		b, err := json.Marshal(v)
		if err != nil {
			return dst, err
		}
		dst = append(append(dst, b...), '\n')
	}
	return dst, nil
}

func (s lineJSON) NewDecoder(data []byte) extension.Decoder {
	s.decodes.Add(1)
	return &lineDecoder{rest: data}
}

type lineDecoder struct{ rest []byte }

func (d *lineDecoder) Decode() (any, error) {
	if len(d.rest) == 0 {
		return nil, io.EOF
	}
	line, rest, _ := bytes.Cut(d.rest, []byte{'\n'})
	d.rest = rest
	var v any
	if err := json.Unmarshal(line, &v); err != nil {
		return nil, err
	}
	return v, nil
}

func lineJSONPlugin(s lineJSON) weft.Option {
	return weft.WithPlugins(weft.NewPlugin("line-json", weft.Provide("line-json", func(weft.Host) (extension.Serialization, error) { return s, nil }, nil)))
}

// TestSerializationIsChosenByName: a serialization added as a plugin is
// chosen by a reference's `serialization`; the Dubbo protocol writes the
// call in it (its id in the header), the provider reads the call by that id
// and answers in the same, and the consumer reads the answer: the call
// works end to end and both sides went through the plugin, never hessian2
// for the call's values. Over Triple, the same plugin carries a wrapped
// (non-IDL) call: application/grpc+line-json, its serializeType.
func TestSerializationIsChosenByName(t *testing.T) {
	consumerSide := lineJSON{new(atomic.Int64), new(atomic.Int64)}
	providerSide := lineJSON{new(atomic.Int64), new(atomic.Int64)}
	dir := t.TempDir()
	newApp(t, `
registries: {local: {address: "embedded://`+dir+`"}}
protocols: {dubbo: {port: 0}, tri: {port: 0}}
provider:
  services:
    greeter: {interface: org.example.Greeter, version: "1.0"}
`, weft.WithService("greeter", greeter{}), lineJSONPlugin(providerSide))

	var c, ct greeterClient
	newApp(t, `
registries: {local: {address: "embedded://`+dir+`"}}
consumer:
  references:
    greeter: {interface: org.example.Greeter, version: "1.0", protocol: dubbo, serialization: line-json}
    greeter-tri: {interface: org.example.Greeter, version: "1.0", protocol: tri, serialization: line-json}
`, weft.WithReference("greeter", &c), weft.WithReference("greeter-tri", &ct), lineJSONPlugin(consumerSide))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got string
	var err error
	for ctx.Err() == nil {
		if got, err = c.SayHello(ctx, "json"); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond) // the provider's registration arrives
	}
	if err != nil || got != "hello json" {
		t.Fatalf("got %q, %v", got, err)
	}
	if consumerSide.marshals.Load() == 0 || consumerSide.decodes.Load() == 0 {
		t.Errorf("the consumer wrote %d and read %d bodies in line-json, want both", consumerSide.marshals.Load(), consumerSide.decodes.Load())
	}
	if providerSide.marshals.Load() == 0 || providerSide.decodes.Load() == 0 {
		t.Errorf("the provider read %d and wrote %d bodies in line-json, want both", providerSide.decodes.Load(), providerSide.marshals.Load())
	}
	before := providerSide.decodes.Load()
	if got, err := ct.SayHello(ctx, "tri"); err != nil || got != "hello tri" {
		t.Fatalf("over tri: got %q, %v", got, err)
	}
	if providerSide.decodes.Load() == before {
		t.Error("the call over tri did not go through line-json")
	}
	// A business error travels in it too.
	if _, err := c.SayHello(ctx, ""); err == nil || !bytes.Contains([]byte(err.Error()), []byte("empty name")) {
		t.Errorf("error %v, want the provider's 'empty name'", err)
	}
}

// TestProtobufSerializationOverDubbo: `serialization: protobuf` (built in,
// Dubbo's id 22) carries a call whose values are a string over the dubbo
// protocol and, wrapped (serializeType protobuf), over tri: the header's
// strings, the argument and the result as StringValues, the attachments as
// Dubbo's MapValue.Map; a business error comes back as its text.
func TestProtobufSerializationOverDubbo(t *testing.T) {
	dir := t.TempDir()
	newApp(t, `
registries: {local: {address: "embedded://`+dir+`"}}
protocols: {dubbo: {port: 0}, tri: {port: 0}}
provider:
  services:
    greeter: {interface: org.example.Greeter, version: "1.0"}
`, weft.WithService("greeter", greeter{}))

	var c, ct greeterClient
	newApp(t, `
registries: {local: {address: "embedded://`+dir+`"}}
consumer:
  references:
    greeter: {interface: org.example.Greeter, version: "1.0", protocol: dubbo, serialization: protobuf}
    greeter-tri: {interface: org.example.Greeter, version: "1.0", protocol: tri, serialization: protobuf}
`, weft.WithReference("greeter", &c), weft.WithReference("greeter-tri", &ct))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got string
	var err error
	for ctx.Err() == nil {
		if got, err = c.SayHello(ctx, "pb"); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond) // the provider's registration arrives
	}
	if err != nil || got != "hello pb" {
		t.Fatalf("got %q, %v", got, err)
	}
	if got, err := ct.SayHello(ctx, "tri"); err != nil || got != "hello tri" {
		t.Fatalf("over tri: got %q, %v", got, err)
	}
	if _, err := c.SayHello(ctx, ""); err == nil || !bytes.Contains([]byte(err.Error()), []byte("empty name")) {
		t.Errorf("error %v, want the provider's 'empty name'", err)
	}
}
