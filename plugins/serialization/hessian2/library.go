package hessian2

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"unsafe"

	hessian "github.com/apache/dubbo-go-hessian2"
)

// maxNotifyCost bounds the library's reference bookkeeping. Each top-level
// Decode, and each key and value of a map it decodes into an interface, walks
// every list decoded so far (hessian.Decoder's refHolders), so a body of many
// small lists inside a big map costs time quadratic in its size: 2 MiB of
// them is hours. The walk below counts that work and refuses data that would
// need more than about a second of it (some 30,000 lists in maps: the fast
// path decodes such data itself, without the library, unless it also holds
// objects).
const maxNotifyCost = 1 << 30

// libDecoder runs the library on data that walk has checked first.
type libDecoder struct {
	dec     *hessian.Decoder
	classes []string // per top-level value, its object's class, if any
	i       int
	skipped int // values decoded again, to rebuild the library's state
	err     error
}

// newLibDecoder checks data from offset from on and returns the library's
// decoder of it, past its first skip values (which the fast decoder has
// returned already).
// The walk charges what the library will build to the budget that d has
// left (see BudgetFor).
func newLibDecoder(data []byte, from, skip int, d *Decoder) (*libDecoder, error) {
	classes, err := walk(data, from, d.budget, d.size, d.factor)
	if err != nil {
		return nil, err
	}
	l := &libDecoder{dec: hessian.NewDecoder(data[from:]), classes: classes, skipped: skip}
	for range skip {
		if _, err := l.decode(); err != nil && err != io.EOF {
			return nil, err
		}
	}
	return l, nil
}

func (l *libDecoder) decode() (any, error) {
	if l.err != nil {
		return nil, l.err
	}
	i := l.i
	l.i++
	v, err := libDecode(l.dec)
	switch {
	case err == io.EOF:
		return nil, io.EOF
	case errors.Is(err, io.EOF):
		// Data ending inside a value is corrupt, not the end of the body.
		l.err = fmt.Errorf("hessian2: data ends inside a value: %v", err)
		return nil, l.err
	case err != nil:
		l.err = fmt.Errorf("hessian2: %w", err)
		return nil, l.err
	}
	if i < len(l.classes) {
		nameUnknownException(v, l.classes[i])
	}
	return v, nil
}

// libDecode turns the library's panics on malformed data into errors.
func libDecode(d *hessian.Decoder) (v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, fmt.Errorf("malformed data (decoder panic: %v)", r)
		}
	}()
	return d.Decode()
}

// nameUnknownException repairs the library's decoding of an exception whose
// class it does not know. It registers an UnknownException for the class and
// decodes into it, but the field that holds the class name is unexported and
// never set, so JavaClassName() returns "" and the class is lost. The walk
// knows the class of each top-level object; this sets it.
func nameUnknownException(v any, class string) {
	u, ok := v.(*hessian.UnknownException)
	if !ok || u == nil || class == "" || u.JavaClassName() != "" {
		return
	}
	f := reflect.ValueOf(u).Elem().FieldByName("name")
	if !f.IsValid() || f.Kind() != reflect.String {
		return
	}
	reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().SetString(class)
}

// walker checks Hessian data against the grammar as the library reads it,
// without building anything, so that the library only ever sees data whose
// lengths are backed by bytes and whose nesting is bounded.
type walker struct {
	Decoder
	classes []classDef
	lists   int64
	cost    int64
}

type classDef struct {
	name   string
	fields int
}

// walk checks every value in data from offset from on and returns, for each
// top-level value, the class of the object it is ("" for anything else).
func walk(data []byte, from int, budget int64, size, factor int) ([]string, error) {
	w := &walker{Decoder: Decoder{data: data, pos: from, budget: budget, size: size, factor: factor}}
	var tops []string
	for w.pos < len(data) {
		if err := w.notify(); err != nil {
			return nil, err
		}
		if data[w.pos] == tagEnd {
			w.pos++
			tops = append(tops, "")
			continue
		}
		cls, err := w.value(0)
		if err != nil {
			return nil, err
		}
		tops = append(tops, cls)
	}
	return tops, nil
}

// notify accounts for one decode through hessian.Decoder.Decode.
func (w *walker) notify() error {
	w.cost += w.lists + 1
	if w.cost > maxNotifyCost {
		return errAt(w.pos, "too many lists and map entries to decode")
	}
	return nil
}

// scalarSize is the size of the fixed-size value that starts with tag, or 0.
func scalarSize(tag byte) int {
	switch {
	case tag >= 0x80 && tag <= 0xbf, tag >= 0xd8 && tag <= 0xef,
		tag == tagNull, tag == tagTrue, tag == tagFalse, tag == tagDoubleZero, tag == tagDoubleOne:
		return 1
	case tag >= 0xc0 && tag <= 0xcf, tag >= 0xf0, tag == tagDoubleByte:
		return 2
	case tag >= 0xd0 && tag <= 0xd7, tag >= 0x38 && tag <= 0x3f, tag == tagDoubleShort:
		return 3
	case tag == tagInt, tag == tagLongInt, tag == tagDoubleMill, tag == tagDateMinute:
		return 5
	case tag == tagLong, tag == tagDouble, tag == tagDate:
		return 9
	}
	return 0
}

func (w *walker) skip(n int, what string) error {
	if err := w.need(n, what); err != nil {
		return err
	}
	w.pos += n
	return nil
}

// value checks the value at w.pos and returns its class if it is an object.
func (w *walker) value(depth int) (string, error) {
	if w.pos >= len(w.data) {
		return "", w.truncated("a container: a value is missing")
	}
	tag := w.data[w.pos]
	if n := scalarSize(tag); n > 0 {
		if err := w.spend(costBoxed); err != nil {
			return "", err
		}
		return "", w.skip(n, "a value")
	}
	switch {
	case isStringTag(tag):
		return "", w.skipStr()
	case tag >= 0x20 && tag <= 0x2f || tag >= 0x34 && tag <= 0x37 || tag == tagBinary || tag == tagBinaryChunk:
		end, total, err := skipBinary(w.data, w.pos)
		w.pos = end
		if err == nil {
			err = w.spend(int64(total) + costSlot)
		}
		return "", err
	case tag == tagRef:
		w.pos++
		_, err := w.int32(true)
		if err == nil {
			err = w.spend(costSlot)
		}
		return "", err
	case tag == tagUListVar || tag == tagUListFixed || tag >= 0x78 && tag <= 0x7f,
		tag == tagListVar || tag == tagListFixed || tag >= 0x70 && tag <= 0x77:
		return "", w.list(depth)
	case tag == tagUMap || tag == tagMap:
		return "", w.mapValue(depth)
	case tag == tagClassDef:
		return w.classDef(depth)
	case tag == tagObject || tag >= 0x60 && tag <= 0x6f:
		return w.object(depth)
	case tag == tagEnd:
		return "", errAt(w.pos, "unexpected end marker 'Z'")
	}
	return "", errAt(w.pos, "invalid tag 0x%02x", tag)
}

func (w *walker) skipStr() error {
	end, n, _, _, err := skipString(w.data, w.pos)
	w.pos = end
	if err != nil {
		return err
	}
	return w.spend(int64(n) + costSlot)
}

// name checks what the library reads with decString: a type or field name,
// which it also accepts as null, a boolean, an integer or a small double.
func (w *walker) name(what string) error {
	if w.pos >= len(w.data) {
		return w.truncated(what)
	}
	tag := w.data[w.pos]
	switch {
	case isStringTag(tag):
		return w.skipStr()
	case tag >= tagDoubleZero && tag <= tagDoubleShort, tag >= 0x80, tag == tagInt,
		tag >= 0x38 && tag <= 0x3f, tag == tagLongInt, tag == tagLong,
		tag == tagNull, tag == tagTrue, tag == tagFalse:
		return w.skip(scalarSize(tag), what)
	}
	return errAt(w.pos, "invalid %s, tag 0x%02x", what, tag)
}

func (w *walker) list(depth int) error {
	if err := w.enter(depth); err != nil {
		return err
	}
	tag := w.data[w.pos]
	w.pos++
	w.lists++
	typed := tag == tagListVar || tag == tagListFixed || tag >= 0x70 && tag <= 0x77
	if typed {
		if err := w.name("list type"); err != nil {
			return err
		}
	}
	if tag == tagListVar || tag == tagUListVar {
		for {
			if w.pos >= len(w.data) {
				return w.truncated("a list")
			}
			if w.data[w.pos] == tagEnd {
				w.pos++
				return nil
			}
			if err := w.spend(costSlot); err != nil {
				return err
			}
			if _, err := w.value(depth + 1); err != nil {
				return err
			}
		}
	}
	var n32 int32
	switch {
	case tag == tagListFixed || tag == tagUListFixed:
		var err error
		if n32, err = w.int32(true); err != nil {
			return err
		}
	case typed:
		n32 = int32(tag) - 0x70
	default:
		n32 = int32(tag) - 0x78
	}
	n, err := w.count(n32, "list")
	if err != nil {
		return err
	}
	if err := w.spend(int64(n) * costSlot); err != nil {
		return err
	}
	for range n {
		if _, err := w.value(depth + 1); err != nil {
			return err
		}
	}
	return nil
}

func (w *walker) mapValue(depth int) error {
	if err := w.enter(depth); err != nil {
		return err
	}
	typed := w.data[w.pos] == tagMap
	w.pos++
	if typed {
		if w.pos < len(w.data) && isStringTag(w.data[w.pos]) {
			if err := w.skipStr(); err != nil {
				return err
			}
		} else if _, err := w.int32(true); err != nil {
			return err
		}
	}
	for {
		if w.pos >= len(w.data) {
			return w.truncated("a map")
		}
		if w.data[w.pos] == tagEnd {
			w.pos++
			return nil
		}
		if err := w.spend(costMapEntry); err != nil {
			return err
		}
		for range 2 { // key, value
			if err := w.notify(); err != nil {
				return err
			}
			if _, err := w.value(depth + 1); err != nil {
				return err
			}
		}
	}
}

// classDef checks a class definition and the value that follows it, which
// the library reads as part of it (recursively: hence the depth).
func (w *walker) classDef(depth int) (string, error) {
	if err := w.enter(depth); err != nil {
		return "", err
	}
	w.pos++
	start := w.pos
	if err := w.name("class name"); err != nil {
		return "", err
	}
	var cls string
	if isStringTag(w.data[start]) {
		name := NewDecoder(w.data)
		name.pos = start
		cls, _ = name.str()
	}
	n32, err := w.int32(true)
	if err != nil {
		return "", err
	}
	n, err := w.count(n32, "class definition")
	if err != nil {
		return "", err
	}
	if err := w.spend(int64(n) * costSlot); err != nil {
		return "", err
	}
	for range n {
		if err := w.name("field name"); err != nil {
			return "", err
		}
	}
	w.classes = append(w.classes, classDef{cls, n})
	return w.value(depth + 1)
}

func (w *walker) object(depth int) (string, error) {
	if err := w.enter(depth); err != nil {
		return "", err
	}
	tag := w.data[w.pos]
	w.pos++
	idx := int32(tag) - 0x60
	if tag == tagObject {
		var err error
		if idx, err = w.int32(true); err != nil {
			return "", err
		}
	}
	if idx < 0 || int(idx) >= len(w.classes) {
		return "", errAt(w.pos, "object of undefined class %d", idx)
	}
	c := w.classes[idx]
	if err := w.spend(costObject + int64(c.fields)*costSlot); err != nil {
		return "", err
	}
	for range c.fields {
		if _, err := w.value(depth + 1); err != nil {
			return "", err
		}
	}
	return c.name, nil
}
