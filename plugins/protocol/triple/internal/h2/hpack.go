package h2

import (
	"bytes"
	"errors"
	"fmt"

	"golang.org/x/net/http2/hpack"
)

// Decoder is a connection's HPACK decoder (RFC 7541). It differs from
// x/net's in one way that matters on the call path: a string literal that
// recurs (a :path, a content type, a metadata key; weft's encoders send
// every field as a literal, see AppendField) is decoded into a
// per-connection scratch buffer and looked up in a small cache of the
// strings this connection sent before, so that decoding a request's
// headers allocates nothing once the connection is warm. FuzzHPACK checks
// it against x/net's decoder.
type Decoder struct {
	dyn     []hpack.HeaderField // newest first
	size    int                 // RFC 7541 4.1: sum of len(name)+len(value)+32
	maxSize int                 // the limit the peer may raise the table to (our SETTINGS_HEADER_TABLE_SIZE)
	cap     int                 // the current limit, after size updates
	maxStr  int
	scratch bytes.Buffer
	cache   map[string]string
}

// maxCached bounds the strings a connection's decoder keeps, and
// maxCachedLen the length of each.
const (
	maxCached    = 256
	maxCachedLen = 128
)

// NewDecoder is a decoder whose dynamic table may grow to tableSize (our
// SETTINGS_HEADER_TABLE_SIZE) and whose strings are at most maxStr bytes.
func NewDecoder(tableSize, maxStr int) *Decoder {
	return &Decoder{maxSize: tableSize, cap: tableSize, maxStr: maxStr, cache: map[string]string{}}
}

var (
	errHPACKTruncated = errors.New("hpack: truncated header block")
	errHPACKInteger   = errors.New("hpack: integer overflow")
)

// Decode runs a whole header block through the decoder, calling emit for
// each field in order.
func (d *Decoder) Decode(b []byte, emit func(hpack.HeaderField)) error {
	sizeUpdateOK := true
	for len(b) > 0 {
		c := b[0]
		switch {
		case c&0x80 != 0: // indexed field
			i, n, err := hpackInt(b, 7)
			if err != nil {
				return err
			}
			b = b[n:]
			f, err := d.at(i)
			if err != nil {
				return err
			}
			emit(f)
			sizeUpdateOK = false
		case c&0xe0 == 0x20: // dynamic table size update
			// RFC 7541 4.2 wants it first in the block; x/net (grpc-go's)
			// minds only while the table holds something, and so do we.
			if !sizeUpdateOK && d.size > 0 {
				return errors.New("hpack: dynamic table size update after a field")
			}
			v, n, err := hpackInt(b, 5)
			if err != nil {
				return err
			}
			b = b[n:]
			if v > uint64(d.maxSize) {
				return fmt.Errorf("hpack: table size %d over the %d allowed", v, d.maxSize)
			}
			d.cap = int(v)
			d.evict(0)
		default:
			prefix, index := uint8(4), false
			if c&0xc0 == 0x40 { // literal with incremental indexing
				prefix, index = 6, true
			}
			i, n, err := hpackInt(b, prefix)
			if err != nil {
				return err
			}
			b = b[n:]
			var f hpack.HeaderField
			if i == 0 {
				if f.Name, b, err = d.str(b); err != nil {
					return err
				}
			} else {
				nf, err := d.at(i)
				if err != nil {
					return err
				}
				f.Name = nf.Name
			}
			if f.Value, b, err = d.str(b); err != nil {
				return err
			}
			f.Sensitive = c&0xf0 == 0x10
			if index {
				d.add(f)
			}
			emit(f)
			sizeUpdateOK = false
		}
	}
	return nil
}

// at is the field at index i (static table first, then dynamic).
func (d *Decoder) at(i uint64) (hpack.HeaderField, error) {
	switch {
	case i == 0:
		return hpack.HeaderField{}, errors.New("hpack: index 0")
	case i <= uint64(len(staticTable)):
		return staticTable[i-1], nil
	case i-uint64(len(staticTable)) <= uint64(len(d.dyn)):
		return d.dyn[i-uint64(len(staticTable))-1], nil
	}
	return hpack.HeaderField{}, fmt.Errorf("hpack: index %d beyond the table (%d entries)", i, len(staticTable)+len(d.dyn))
}

func (d *Decoder) add(f hpack.HeaderField) {
	sz := len(f.Name) + len(f.Value) + 32
	if sz > d.cap {
		d.dyn, d.size = d.dyn[:0], 0 // an entry larger than the table empties it
		return
	}
	d.evict(sz)
	d.dyn = append(d.dyn, hpack.HeaderField{})
	copy(d.dyn[1:], d.dyn)
	d.dyn[0] = hpack.HeaderField{Name: f.Name, Value: f.Value}
	d.size += sz
}

// evict drops the oldest entries until room more bytes fit.
func (d *Decoder) evict(room int) {
	for len(d.dyn) > 0 && d.size+room > d.cap {
		last := d.dyn[len(d.dyn)-1]
		d.size -= len(last.Name) + len(last.Value) + 32
		d.dyn = d.dyn[:len(d.dyn)-1]
	}
}

// str decodes a string literal, through the cache when it is short.
func (d *Decoder) str(b []byte) (string, []byte, error) {
	if len(b) == 0 {
		return "", nil, errHPACKTruncated
	}
	huff := b[0]&0x80 != 0
	n, k, err := hpackInt(b, 7)
	if err != nil {
		return "", nil, err
	}
	b = b[k:]
	if n > uint64(len(b)) {
		return "", nil, errHPACKTruncated
	}
	raw := b[:n]
	b = b[n:]
	if huff {
		if n*8/5 > uint64(d.maxStr) { // Huffman codes are at least 5 bits
			return "", nil, fmt.Errorf("hpack: string over %d bytes", d.maxStr)
		}
		d.scratch.Reset()
		if _, err := hpack.HuffmanDecode(&d.scratch, raw); err != nil {
			return "", nil, err
		}
		raw = d.scratch.Bytes()
	}
	if len(raw) > d.maxStr {
		return "", nil, fmt.Errorf("hpack: string over %d bytes", d.maxStr)
	}
	if len(raw) > maxCachedLen {
		return string(raw), b, nil
	}
	if s, ok := d.cache[string(raw)]; ok {
		return s, b, nil
	}
	s := string(raw)
	if len(d.cache) < maxCached {
		d.cache[s] = s
	}
	return s, b, nil
}

// The header block is encoded without the HPACK dynamic table: literals
// never indexed, names from the static table where it has them. That makes
// encoding stateless, so that every goroutine answering a call encodes its
// own frames in parallel, in any order on the wire, with no lock and no
// per-connection encoder; the cost is some bytes per response that a
// dynamic table would have saved.
var staticNames = map[string]byte{
	":authority": 1, ":method": 2, ":path": 4, ":scheme": 6, ":status": 8,
	"accept-encoding": 16, "content-type": 31, "user-agent": 58,
}

// AppendField appends name: value as a literal field never indexed
// (RFC 7541 6.2.3), ":status: 200" as the static entry it is.
func AppendField(dst []byte, name, value string) []byte {
	if name == ":status" && value == "200" {
		return append(dst, 0x88)
	}
	if i := staticNames[name]; i != 0 {
		dst = appendInt(dst, 0x10, 4, uint64(i))
	} else {
		dst = append(dst, 0x10)
		dst = appendInt(dst, 0, 7, uint64(len(name)))
		dst = append(dst, name...)
	}
	dst = appendInt(dst, 0, 7, uint64(len(value)))
	return append(dst, value...)
}

// appendInt is RFC 7541 5.1's integer with an n-bit prefix, first
// byte's high bits from first.
func appendInt(dst []byte, first byte, n uint, v uint64) []byte {
	max := uint64(1)<<n - 1
	if v < max {
		return append(dst, first|byte(v))
	}
	dst = append(dst, first|byte(max))
	v -= max
	for v >= 128 {
		dst = append(dst, byte(v&0x7f|0x80))
		v >>= 7
	}
	return append(dst, byte(v))
}

// hpackInt reads an integer with an n-bit prefix (RFC 7541 5.1).
func hpackInt(b []byte, n uint8) (uint64, int, error) {
	if len(b) == 0 {
		return 0, 0, errHPACKTruncated
	}
	max := uint64(1)<<n - 1
	v := uint64(b[0]) & max
	if v < max {
		return v, 1, nil
	}
	var m uint
	for i := 1; i < len(b); i++ {
		c := b[i]
		v += uint64(c&0x7f) << m
		if c&0x80 == 0 {
			return v, i + 1, nil
		}
		if m += 7; m > 56 {
			return 0, 0, errHPACKInteger
		}
	}
	return 0, 0, errHPACKTruncated
}

// staticTable is RFC 7541 Appendix A.
var staticTable = []hpack.HeaderField{
	{Name: ":authority"}, {Name: ":method", Value: "GET"}, {Name: ":method", Value: "POST"},
	{Name: ":path", Value: "/"}, {Name: ":path", Value: "/index.html"}, {Name: ":scheme", Value: "http"},
	{Name: ":scheme", Value: "https"}, {Name: ":status", Value: "200"}, {Name: ":status", Value: "204"},
	{Name: ":status", Value: "206"}, {Name: ":status", Value: "304"}, {Name: ":status", Value: "400"},
	{Name: ":status", Value: "404"}, {Name: ":status", Value: "500"}, {Name: "accept-charset"},
	{Name: "accept-encoding", Value: "gzip, deflate"}, {Name: "accept-language"}, {Name: "accept-ranges"},
	{Name: "accept"}, {Name: "access-control-allow-origin"}, {Name: "age"}, {Name: "allow"},
	{Name: "authorization"}, {Name: "cache-control"}, {Name: "content-disposition"}, {Name: "content-encoding"},
	{Name: "content-language"}, {Name: "content-length"}, {Name: "content-location"}, {Name: "content-range"},
	{Name: "content-type"}, {Name: "cookie"}, {Name: "date"}, {Name: "etag"}, {Name: "expect"},
	{Name: "expires"}, {Name: "from"}, {Name: "host"}, {Name: "if-match"}, {Name: "if-modified-since"},
	{Name: "if-none-match"}, {Name: "if-range"}, {Name: "if-unmodified-since"}, {Name: "last-modified"},
	{Name: "link"}, {Name: "location"}, {Name: "max-forwards"}, {Name: "proxy-authenticate"},
	{Name: "proxy-authorization"}, {Name: "range"}, {Name: "referer"}, {Name: "refresh"}, {Name: "retry-after"},
	{Name: "server"}, {Name: "set-cookie"}, {Name: "strict-transport-security"}, {Name: "transfer-encoding"},
	{Name: "user-agent"}, {Name: "vary"}, {Name: "via"}, {Name: "www-authenticate"},
}
