package protobuf_test

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/plugins/serialization/protobuf"
)

// The bytes are what protobuf-java's writeDelimitedTo gives for Dubbo's
// GenericProtobufObjectOutput: a varint length, then the message; a string
// is a StringValue (field 1, length-delimited).
func TestWireFormat(t *testing.T) {
	var s protobuf.Serialization
	if s.ID() != 22 || protobuf.Name != "protobuf" {
		t.Fatalf("id %d, name %s: Dubbo's protobuf serialization is id 22", s.ID(), protobuf.Name)
	}
	got, err := s.Marshal(nil, "hello", int32(300), true)
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{7, 0x0a, 5, 'h', 'e', 'l', 'l', 'o', 3, 0x08, 0xac, 0x02, 2, 0x08, 1}
	if !bytes.Equal(got, want) {
		t.Fatalf("got % x\nwant % x", got, want)
	}
	// Attachments: MapValue.Map, one entry {1: key, 2: value} each, keys
	// sorted.
	got, err = s.Marshal(nil, map[string]any{"b": "2", "a": int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	want = []byte{16, 0x0a, 6, 0x0a, 1, 'a', 0x12, 1, '1', 0x0a, 6, 0x0a, 1, 'b', 0x12, 1, '2'}
	if !bytes.Equal(got, want) {
		t.Fatalf("attachments: got % x\nwant % x", got, want)
	}
}

func TestRoundTrip(t *testing.T) {
	var s protobuf.Serialization
	msg := durationpb.New(1500 * time.Millisecond)
	vals := []any{"path.Svc", int32(-7), int64(1 << 40), 2.5, float32(1.5), true, []byte{0, 1, 2}, msg, map[string]string{"k": "v", "": "empty"}}
	b, err := s.Marshal(nil, vals...)
	if err != nil {
		t.Fatal(err)
	}
	d := s.NewDecoder(b)
	for i, want := range vals {
		v, err := d.Decode()
		if err != nil {
			t.Fatalf("value %d: %v", i, err)
		}
		dec, ok := v.(kernel.Decodable)
		if !ok {
			t.Fatalf("value %d is %T, want a kernel.Decodable", i, v)
		}
		got, err := dec.DecodeAs(reflect.TypeOf(want))
		if err != nil {
			t.Fatalf("value %d as %T: %v", i, want, err)
		}
		if m, ok := want.(proto.Message); ok {
			if !proto.Equal(m, got.Interface().(proto.Message)) {
				t.Fatalf("value %d: got %v, want %v", i, got, want)
			}
			continue
		}
		if !reflect.DeepEqual(got.Interface(), want) {
			t.Fatalf("value %d: got %#v, want %#v", i, got.Interface(), want)
		}
	}
	if _, err := d.Decode(); err == nil {
		t.Fatal("a value past the end decoded")
	}
}

func TestRefusals(t *testing.T) {
	var s protobuf.Serialization
	for _, v := range []any{nil, struct{ A int }{1}, (*wrapperspb.StringValue)(nil), map[string]any{"x": []int{1}}} {
		if _, err := s.Marshal(nil, v); err == nil || !strings.Contains(err.Error(), "protobuf") {
			t.Errorf("%#v: err %v, want a protobuf error naming the value", v, err)
		}
	}
	b, _ := s.Marshal(nil, "x")
	v, _ := s.NewDecoder(b).Decode()
	if _, err := v.(kernel.Decodable).DecodeAs(reflect.TypeFor[struct{ A int }]()); err == nil {
		t.Error("decoded into a struct that is no message")
	}
}

// A frame cannot claim more than it has, nor make a map far larger than
// itself.
func TestHostileBytes(t *testing.T) {
	var s protobuf.Serialization
	for _, b := range [][]byte{
		{0xff, 0xff, 0xff, 0xff, 0x0f},                                     // 4 GiB claimed, nothing there
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, // a varint too long
		{5, 1, 2}, // 5 claimed, 2 there
	} {
		if _, err := s.NewDecoder(b).Decode(); err == nil {
			t.Errorf("% x decoded", b)
		}
	}
	// 70,000 distinct one-byte-ish keys: refused past MaxAttachments.
	var body []byte
	for i := 0; i < protobuf.MaxAttachments+10; i++ {
		entry := protowire.AppendTag(nil, 1, protowire.BytesType)
		entry = protowire.AppendVarint(entry, 3)
		entry = append(entry, byte(i), byte(i>>8), byte(i>>16))
		body = protowire.AppendTag(body, 1, protowire.BytesType)
		body = protowire.AppendBytes(body, entry)
	}
	v, err := s.NewDecoder(protowire.AppendBytes(nil, body)).Decode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.(kernel.Decodable).DecodeAs(reflect.TypeFor[map[string]any]()); err == nil || !strings.Contains(err.Error(), "attachments") {
		t.Fatalf("err %v, want the attachments bound", err)
	}
}

// FuzzDecode decodes every value of hostile bytes as each type the codec
// asks for, and walks what it gets (a decoded map is ranged over whole).
func FuzzDecode(f *testing.F) {
	var s protobuf.Serialization
	seed, _ := s.Marshal(nil, "a", int32(1), map[string]string{"k": "v"}, durationpb.New(time.Second))
	f.Add(seed)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	types := []reflect.Type{reflect.TypeFor[string](), reflect.TypeFor[int32](), reflect.TypeFor[int64](), reflect.TypeFor[bool](),
		reflect.TypeFor[float64](), reflect.TypeFor[[]byte](), reflect.TypeFor[map[string]any](), reflect.TypeFor[*durationpb.Duration]()}
	f.Fuzz(func(t *testing.T, b []byte) {
		d := s.NewDecoder(b)
		for i := 0; i < 64; i++ {
			v, err := d.Decode()
			if err != nil {
				return
			}
			for _, typ := range types {
				rv, err := v.(kernel.Decodable).DecodeAs(typ)
				if err != nil {
					continue
				}
				if rv.Type() != typ {
					t.Fatalf("DecodeAs(%s) gave %s", typ, rv.Type())
				}
				if typ.Kind() == reflect.Map {
					for it := rv.MapRange(); it.Next(); {
						_ = it.Key().String() + it.Value().Interface().(string)
					}
				}
			}
		}
	})
}
