package hessian2

import (
	"encoding/binary"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	hessian "github.com/apache/dubbo-go-hessian2"
)

// This file is a validator for github.com/apache/dubbo-go-hessian2 v1.12.5,
// whose Decoder trusts its input: a 6-byte list claiming ten million
// elements makes it allocate 152 MiB, a negative length or reference index
// panics, nesting has no limit, a typed list's element of the wrong type
// panics in reflect, and every unknown exception-shaped class a peer names
// is registered, for good, in its process-wide registry. check walks a body
// once, as one library Decoder would read it, building no values: it keeps
// the library's state (references, type references, class definitions, the
// list holders it patches after every Decode) as Go types, and accepts only
// data on which Decode, called until the data ends, neither fails nor
// panics and allocates at most the budget. What it mirrors is the library's
// code, quirks included (the comments name the library's functions); where
// the library's behaviour depends on values check does not build, check
// refuses the construct instead.

// Limits of the validator beyond MaxDepth.
const (
	// maxListDims bounds the leading '[' of a typed list's type name: the
	// library makes a reflect slice type for each (getListType), and
	// reflect names the type of depth d with 2d bytes and keeps every type
	// it made for good, so that a 64 KiB name of '[' would cost it 4 GiB.
	// Java's arrays have at most 255 dimensions; real ones, a few.
	maxListDims = 32
	// maxNotifyWork bounds the library's quadratic patching: after every
	// Decode (each top-level value and each key and value of a map), it
	// visits every list decoded so far and sets each place a reference to
	// a list was stored in (Decoder.Decode, _refHolder.notify). A body of
	// 100,000 empty lists and a map of 100,000 entries, 400 KB, would make
	// it 2·10^10 visits. Measured, a visit is 0.8 ns, a place set by
	// reflection 11 ns (notifyPlace visits): the bound is ~80 ms of CPU.
	maxNotifyWork = 100_000_000
	notifyPlace   = 14
	// maxLibExceptions bounds the exception classes the library may
	// register by itself, process-wide (see allowException).
	maxLibExceptions = 1024
	// maxLibFieldNames and maxLibFieldBytes bound the field names, absent
	// from a registered Go type, that the library caches for good
	// (findFieldWithCache keeps every name it looked up, per type).
	maxLibFieldNames = 4096
	maxLibFieldBytes = 1 << 20
)

// What the library allocates, beyond the values' own bytes; see
// validate_test.go, which weighs them against the heap.
const (
	vcDecoder   = 4096 + 512 // NewDecoder: its bufio.Reader's buffer, the Decoder, its TypeRefs
	vcValueBox  = 24         // a reflect.Value put in an interface (appendRefs, EnsureRawAny)
	vcHolder    = 48         // a _refHolder: a list's value and destinations
	vcSliceHdr  = 24         // a slice header on the heap: MakeSlice's, reflect.Append's, a []byte in an interface
	vcStringBox = 16         // a string put in an interface
	vcSmallBox  = 8          // an int32, int64 or float64 put in an interface; the small buffers numbers are read through
	vcTimeBox   = 24         // a time.Time put in an interface
	vcClassInfo = 64         // a *ClassInfo
	// vcBinaryPool is the 64 KiB buffer decBinary borrows from a
	// sync.Pool: allocated when the pool is empty, which it is at first
	// and after two GCs; charged once.
	vcBinaryPool = 65536 + 512
	// vcErrorf is a github.com/pkg/errors error, which the library
	// makes (and drops) for each field of a registered class its Go type
	// lacks: the message and a stack of 32 PCs (measured: 352).
	vcErrorf = 384
	// vcFieldScan is each field of the Go type the first lookup of a name
	// scans (findField), vcFieldStore the name's cache entry.
	vcFieldScan  = 96
	vcFieldStore = 384
	// vcObjectMap is an object of an unregistered class beyond its map's
	// own tables and header: measured, 78.
	vcObjectMap = 96
	// vcException is what registering an exception class costs the
	// library (RegisterPOJO: its type, class definition, name mappings),
	// kept for good.
	vcException = 4096
	// vcMapEntryReflect is a map entry set by reflection (SetMapIndex
	// puts its key and value in new interfaces, Convert may copy them).
	vcMapEntryReflect = 64
)

// errBudget is the error of a body over its memory budget.
func (c *validator) errBudget() error {
	return errAt(c.pos, "decoding with dubbo-go-hessian2 needs more than the memory budget of %d bytes for this %d-byte body; send smaller calls or typed arrays, or raise the protocol's decode.factor",
		c.budget, len(c.data))
}

// check walks data as a stream of Hessian 2 values, as one library Decoder
// decodes them one after another (class definitions, type references and
// back references shared across the values), without building any. It
// returns the end offset in data of each top-level value. err names the
// offset and what was wrong; it never echoes a value whole.
//
// A 'Z' at the top level ends the stream, as it does for the library,
// whose Decode returns io.EOF there: check looks no further, and ends
// has no entry for it.
func check(data []byte, budget int64) (ends []int, err error) {
	return (&validator{data: data, left: budget, budget: budget}).run()
}

func (c *validator) run() (ends []int, err error) {
	if err := c.spend(vcDecoder); err != nil {
		return nil, err
	}
	for c.pos < len(c.data) && c.data[c.pos] != tagEnd {
		if _, err := c.decode(0); err != nil {
			return nil, err
		}
		ends = append(ends, c.pos)
	}
	if err := c.commit(); err != nil {
		return nil, err
	}
	return ends, nil
}

// lv is a value as the library's DecodeValue returns it, by its Go type.
type lv struct {
	// t is the type of EnsureRawValue of the value; nil for nil.
	t reflect.Type
	// n is a []byte's length (its conversions depend on it).
	n int
	// list >= 0: the value is a list, which the library keeps in a
	// _refHolder (lists[list]); its type is the list's current one.
	list int32
	// fresh: DecodeValue returned the *_refHolder itself (a list just
	// read); else a reflect.Value of it (a back reference to a list).
	fresh bool
}

var lvNil = lv{list: -1}

func lvOf(t reflect.Type) lv { return lv{t: t, list: -1} }

// lvList is a list the library keeps in a _refHolder: its value changes as
// the library converts it, and every place a reference to it was stored in
// is set to its value after each Decode.
//
// The validator keeps one per list and one reference record (uint32, see
// packRef) per list, map and object, so they are as small as they can be:
// a list of empty lists is one wire byte each, and sixteen bodies checked
// at once each hold their records until their budget runs out (before, at
// 96 bytes a list, that was ~30 MiB a body, uncharged; now 24).
type lvList struct {
	t    vTypeID // its value's type; 0 once a conversion left it an invalid reflect.Value
	n    int32   // its length (a body is under 2 GiB)
	elem vTypeID // an interface-element list's one element type, while it has one
	// x is its record in validator.listX (more element types, or
	// destinations), or -1: most lists need none.
	x      int32
	many   bool // more element types than vMaxElemTypes
	hasNil bool // an element is nil
}

// lvListX is what few lists need: their element types when they have more
// than one, and the places references to them went.
type lvListX struct {
	elems []reflect.Type // two to vMaxElemTypes
	d     lvDests
}

// lvDests are the places notify sets a list's value in.
type lvDests struct {
	types vChunks[vTypeID]
	alloc int64  // what setting them all allocates
	n     vSlice // the holder's destinations slice, for its growth
}

// vTypeID is a Go type the validator recorded, by its place in
// validator.tlist plus one (0 is nil): 4 bytes in a record instead of an
// interface's 16.
type vTypeID uint32

// vChunks is an append-only vector in blocks of vChunk elements: growing it
// copies nothing and leaves no garbage (a slice grown by append holds its
// old array and the new one at once, and the GC frees the old later: a
// third more memory at the peak). The first block grows by append, so that
// small bodies allocate little. Pointers into it stay valid only until
// the next push (the first block moves).
type vChunks[T any] struct {
	head []T
	rest [][]T
	n    int
}

const vChunk = 4096

func (v *vChunks[T]) len() int { return v.n }

func (v *vChunks[T]) push(x T) int {
	i := v.n
	v.n++
	if i < vChunk {
		v.head = append(v.head, x)
		return i
	}
	j := i - vChunk
	if j%vChunk == 0 {
		v.rest = append(v.rest, make([]T, 0, vChunk))
	}
	b := &v.rest[j/vChunk]
	*b = append(*b, x)
	return i
}

func (v *vChunks[T]) at(i int) *T {
	if i < vChunk {
		return &v.head[i]
	}
	j := i - vChunk
	return &v.rest[j/vChunk][j%vChunk]
}

const vMaxElemTypes = 8

// maxNames bounds the names a validator interns.
const maxNames = 4096

// lvClass is a class definition. A body may hold hundreds of thousands
// (five wire bytes each, none used), so it is kept small: 24 bytes, in
// chunks, its name read again from data when an object needs it (before,
// 112 bytes in a slice grown by append: a 750 MiB peak for sixteen such
// bodies at once). Its field names go to validator.fieldNames.
type lvClass struct {
	nameAt           int32 // where its name starts in data
	fieldAt, nfields int32 // its field names: fieldNames[fieldAt:fieldAt+nfields]
	distinct         int32 // "_class" and the distinct field names
	typ              vTypeID
	kind             vClassKind
	exception        bool // Throwable's four fields (checkAndGetException)
	resolved         bool
}

type vClassKind uint8

const (
	clsMap      vClassKind = iota // unregistered: map[string]any (decClassToMap)
	clsInstance                   // a registered struct (decInstance)
	clsEnum                       // a registered POJOEnum (decEnum)
	clsSQLTime                    // java.sql.Date and Time (JavaSqlTimeSerializer)
	clsInteger                    // java.math.BigInteger (IntegerSerializer)
	clsDecimal                    // java.math.BigDecimal (DecimalSerializer)
)

// vSlice follows a slice the library appends to, to charge its growth.
type vSlice struct{ n, c int }

// add appends one element of size bytes and returns what Go allocated for it.
func (s *vSlice) add(size int64) int64 {
	s.n++
	if s.n <= s.c {
		return 0
	}
	c, bytes := vGrowCap(s.n, s.c, size)
	s.c = c
	return bytes
}

// vGrowCap is Go's growslice: the capacity and bytes of the array that
// append allocates when a slice of capacity oldCap must hold newLen
// elements of size bytes (runtime.nextslicecap, then rounded up to a size
// class).
func vGrowCap(newLen, oldCap int, size int64) (int, int64) {
	newcap := oldCap
	if double := 2 * oldCap; newLen > double {
		newcap = newLen
	} else if oldCap < 256 {
		newcap = double
	} else {
		for newcap < newLen {
			newcap += (newcap + 3*256) >> 2
		}
	}
	if size == 0 {
		return newcap, 0
	}
	bytes := vRoundAlloc(int64(newcap) * size)
	return int(bytes / size), bytes
}

// vSizeClasses are Go's small object sizes (internal/runtime/gc).
var vSizeClasses = [...]int64{8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256, 288, 320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024, 1152, 1280, 1408, 1536, 1792, 2048, 2304, 2688, 3072, 3200, 3456, 4096, 4864, 5376, 6144, 6528, 6784, 6912, 8192, 9472, 9728, 10240, 10880, 12288, 13568, 14336, 16384, 18432, 19072, 20480, 21760, 24576, 27264, 28672, 32768}

// vRoundAlloc is what Go allocates for n bytes: a size class, or whole
// pages past 32 KiB.
func vRoundAlloc(n int64) int64 {
	if n <= 0 {
		return 0
	}
	if n > 32768 {
		return (n + 8191) &^ 8191
	}
	lo, hi := 0, len(vSizeClasses)-1
	for lo < hi {
		m := (lo + hi) / 2
		if vSizeClasses[m] < n {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return vSizeClasses[lo]
}

// vMapGrowthSlot is mapGrowth for a map whose slot holds slot bytes of key
// and value, aligned to 8, and its control byte (mapGrowth's are 32 and 1,
// any to any).
func vMapGrowthSlot(n int, slot int64) int64 {
	g := mapGrowth(n)
	if s := (slot + 7) &^ 7; g != 0 && s != 32 {
		g = g * (s + 1) / 33
	}
	return g
}

type validator struct {
	data   []byte
	pos    int
	left   int64 // budget still unspent
	budget int64

	refs    vChunks[uint32] // the library's Decoder.refs (packRef)
	nrefs   vSlice
	lists   vChunks[lvList] // every _refHolder (Decoder.refHolders)
	listX   []lvListX
	holders vSlice
	// tlist and tids intern the types of the records (vTypeID); last is
	// the one looked up last, as runs of one type are the rule.
	tlist  []reflect.Type
	tids   map[reflect.Type]vTypeID
	lastT  reflect.Type
	lastID vTypeID
	// dests is how many destinations the holders have; notifyAlloc what
	// setting them all allocates (after every Decode).
	dests       int
	notifyAlloc int64
	work        int64

	types      []reflect.Type // TypeRefs.typeRefs
	typeNames  map[string]bool
	ntypes     vSlice
	classes    vChunks[lvClass] // classInfoList
	fieldNames vChunks[string]  // the classes' field names
	nclasses   vSlice

	probes    map[string]reflect.Type // registered types by name (probeClass)
	listTypes map[string]reflect.Type // getListType by name (probeList)
	fieldSeen map[vFieldKey]vFieldRes
	// Process-wide registrations the body would make the library do,
	// committed when the whole body passes.
	pendingExceptions []string
	pendingFields     []vFieldKey
	binaryPool        bool
	buf               []byte            // name's text
	names             map[string]string // the names read so far
}

func (c *validator) spend(n int64) error {
	c.left -= n
	if c.left < 0 {
		return c.errBudget()
	}
	return nil
}

func (c *validator) truncated(what string) error {
	return errAt(c.pos, "data ends inside %s", what)
}

func (c *validator) enter(depth int) error {
	if depth >= MaxDepth {
		return errAt(c.pos, "nesting deeper than %d", MaxDepth)
	}
	return nil
}

// need makes sure n bytes remain at c.pos: the library reads past the end
// of the data as io.EOF, which some of its loops take for an end, so check
// refuses truncated data wherever it is.
func (c *validator) need(n int, what string) error {
	if len(c.data)-c.pos < n {
		return c.truncated(what)
	}
	return nil
}

// decode is the library's Decode: DecodeValue, then every list holder sets
// the places references to it went, then EnsureRawAny.
func (c *validator) decode(depth int) (lv, error) {
	v, err := c.value(depth)
	if err != nil {
		return v, err
	}
	if err := c.notify(); err != nil {
		return v, err
	}
	return c.rawAny(v)
}

// notify charges Decode's loop over the holders and their destinations.
func (c *validator) notify() error {
	c.work += int64(c.lists.len()) + notifyPlace*int64(c.dests)
	if c.work > maxNotifyWork {
		return errAt(c.pos, "the library would patch %d list references after its decodes (more than %d): too many lists before too many map entries; send fewer lists or smaller maps",
			c.work, maxNotifyWork)
	}
	return c.spend(c.notifyAlloc)
}

// rawAny is EnsureRawAny: a list's holder gives way to the list (put in an
// interface on the way), or nil once a conversion emptied it.
func (c *validator) rawAny(v lv) (lv, error) {
	if v.list < 0 {
		return v, nil
	}
	if err := c.spend(vcValueBox); err != nil {
		return v, err
	}
	return lvOf(c.typeOf(c.lists.at(int(v.list)).t)), nil
}

// rawType is the type of EnsureRawValue(v): a list's current type, nil for
// nil and for an emptied list.
func (c *validator) rawType(v lv) reflect.Type {
	if v.list >= 0 {
		return c.typeOf(c.lists.at(int(v.list)).t)
	}
	return v.t
}

// isNil: DecodeValue returned nil.
func (v lv) isNil() bool { return v.list < 0 && v.t == nil }

// addRef is appendRefs for a value other than a list; boxed: v is a
// reflect.Value, which the library puts in an interface.
func (c *validator) addRef(v lv, boxed bool) error {
	c.refs.push(c.packRef(v))
	cost := c.nrefs.add(16)
	if boxed {
		cost += vcValueBox
	}
	return c.spend(cost)
}

// vRefList marks a reference record that is a list's index; any other is
// the value's vTypeID (a reference is never to a []byte, so lv.n is 0).
const vRefList = 1 << 31

func (c *validator) packRef(v lv) uint32 {
	if v.list >= 0 {
		return vRefList | uint32(v.list)
	}
	return uint32(c.tid(v.t))
}

func (c *validator) unpackRef(r uint32) lv {
	if r&vRefList != 0 {
		return lv{list: int32(r &^ vRefList)}
	}
	return lvOf(c.typeOf(vTypeID(r)))
}

// tid interns t.
func (c *validator) tid(t reflect.Type) vTypeID {
	if t == nil {
		return 0
	}
	if t == c.lastT {
		return c.lastID
	}
	id, ok := c.tids[t]
	if !ok {
		if c.tids == nil {
			c.tids = make(map[reflect.Type]vTypeID)
		}
		c.tlist = append(c.tlist, t)
		id = vTypeID(len(c.tlist))
		c.tids[t] = id
	}
	c.lastT, c.lastID = t, id
	return id
}

func (c *validator) typeOf(id vTypeID) reflect.Type {
	if id == 0 {
		return nil
	}
	return c.tlist[id-1]
}

// addList is appendRefs for a list (or a typed map of a list's type): a
// holder, recorded in refs and refHolders.
func (c *validator) addList(t reflect.Type, n int) (int, error) {
	li := c.lists.push(lvList{t: c.tid(t), n: int32(n), x: -1})
	c.refs.push(vRefList | uint32(li))
	cost := c.nrefs.add(16) + c.holders.add(8) + 2*vcValueBox + vcHolder + 8 // 8: measured, unaccounted
	return li, c.spend(cost)
}

// extra is list l's lvListX, made on first need.
func (c *validator) extra(l *lvList) *lvListX {
	if l.x < 0 {
		l.x = int32(len(c.listX))
		c.listX = append(c.listX, lvListX{})
	}
	return &c.listX[l.x]
}

// elemsOf is list l's element types (a new slice when it has one).
func (c *validator) elemsOf(l *lvList) []reflect.Type {
	if l.x >= 0 && len(c.listX[l.x].elems) > 0 {
		return c.listX[l.x].elems
	}
	if l.elem != 0 {
		return []reflect.Type{c.typeOf(l.elem)}
	}
	return nil
}

// setElems records elems as list l's element types.
func (c *validator) setElems(l *lvList, elems []reflect.Type, many bool) {
	l.many, l.elem = many, 0
	if l.x >= 0 {
		c.listX[l.x].elems = nil
	}
	switch len(elems) {
	case 0:
	case 1:
		l.elem = c.tid(elems[0])
	default:
		c.extra(l).elems = elems
	}
}

// noteElem records an element of list li.
func (c *validator) noteElem(li int, t reflect.Type) {
	l := c.lists.at(li)
	if t == nil {
		l.hasNil = true
		return
	}
	if l.many {
		return
	}
	if l.x < 0 || len(c.listX[l.x].elems) == 0 {
		switch {
		case l.elem == 0:
			l.elem = c.tid(t)
		case c.typeOf(l.elem) != t:
			c.extra(l).elems = []reflect.Type{c.typeOf(l.elem), t}
			l.elem = 0
		}
		return
	}
	x := &c.listX[l.x]
	for _, e := range x.elems {
		if e == t {
			return
		}
	}
	if len(x.elems) == vMaxElemTypes {
		l.many = true
		return
	}
	x.elems = append(x.elems, t)
}

// vRefHolder stands for the library's *_refHolder, which a map field's key
// may be: a pointer type with no methods.
type vRefHolder struct{ _ [0]func() }

// Go types the library decodes into.
var (
	vtBool       = reflect.TypeFor[bool]()
	vtInt32      = reflect.TypeFor[int32]()
	vtInt64      = reflect.TypeFor[int64]()
	vtFloat64    = reflect.TypeFor[float64]()
	vtString     = reflect.TypeFor[string]()
	vtBytes      = reflect.TypeFor[[]byte]()
	vtTime       = reflect.TypeFor[time.Time]()
	vtAnyMap     = reflect.TypeFor[map[any]any]()
	vtStringMap  = reflect.TypeFor[map[string]any]()
	vtHolderPtr  = reflect.TypeFor[*vRefHolder]()
	vtPOJOEnum   = reflect.TypeFor[hessian.POJOEnum]()
	vtUnknownExc = reflect.TypeFor[hessian.UnknownException]()
)

// value is DecodeValue.
func (c *validator) value(depth int) (lv, error) {
	if c.pos >= len(c.data) {
		return lvNil, c.truncated("a container: a value is missing")
	}
	tag := c.data[c.pos]
	switch {
	case tag == tagEnd:
		// DecodeValue returns io.EOF: a list read to its end, but
		// anywhere else the library's reading goes astray.
		return lvNil, errAt(c.pos, "unexpected end marker 'Z'")
	case tag == tagNull:
		c.pos++
		return lvNil, nil
	case tag == tagTrue || tag == tagFalse:
		c.pos++
		return lvOf(vtBool), nil
	case tag == tagRef:
		return c.ref()
	case tag >= 0x80 && tag <= 0xd7 || tag == tagInt:
		c.pos++
		i, cost, err := c.int32At(tag)
		if err != nil {
			return lvNil, err
		}
		if uint32(i) > 255 { // Go boxes 0-255 without allocating
			cost += vcSmallBox
		}
		return lvOf(vtInt32), c.spend(cost)
	case tag >= 0xd8 || tag >= 0x38 && tag <= 0x3f || tag == tagLongInt || tag == tagLong:
		c.pos++
		_, cost, err := c.int64At(tag)
		if err != nil {
			return lvNil, err
		}
		// Measured: the library's int64 is boxed whatever its value.
		return lvOf(vtInt64), c.spend(cost + vcSmallBox)
	case tag == tagDate || tag == tagDateMinute:
		c.pos++
		if err := c.date(tag); err != nil {
			return lvNil, err
		}
		return lvOf(vtTime), c.spend(vcSmallBox + vcTimeBox)
	case tag >= tagDoubleZero && tag <= tagDoubleMill || tag == tagDouble:
		c.pos++
		n := 0
		switch tag {
		case tagDoubleByte:
			n = 1
		case tagDoubleShort:
			n = 2
		case tagDoubleMill:
			n = 4
		case tagDouble:
			n = 8
		}
		if err := c.need(n, "a double"); err != nil {
			return lvNil, err
		}
		c.pos += n
		var cost int64
		if n > 0 { // binary.Read's buffer, the float64 boxed
			cost += 2 * vcSmallBox
		} // 0.0 and 1.0 are constants, boxed without allocating
		return lvOf(vtFloat64), c.spend(cost)
	case isStringTag(tag):
		n, err := c.strValue()
		if err != nil {
			return lvNil, err
		}
		if n > 0 {
			return lvOf(vtString), c.spend(vcStringBox)
		}
		return lvOf(vtString), nil
	case tag >= 0x20 && tag <= 0x2f || tag >= 0x34 && tag <= 0x37 || tag == tagBinary || tag == tagBinaryChunk:
		return c.binary()
	case tag >= 0x70 && tag <= 0x77 || tag == tagListFixed || tag == tagListVar:
		return c.typedList(depth)
	case tag >= 0x78 && tag <= 0x7f || tag == tagUListFixed || tag == tagUListVar:
		return c.untypedList(depth)
	case tag == tagMap:
		return c.typedMap(depth)
	case tag == tagUMap:
		return c.untypedMap(depth)
	case tag == tagClassDef || tag == tagObject || tag >= 0x60 && tag <= 0x6f:
		return c.object(depth)
	}
	return lvNil, errAt(c.pos, "invalid tag 0x%02x", tag)
}

// int32At is decInt32 for a tag already read, with what it allocates
// (the buffers its longer forms are read through).
func (c *validator) int32At(tag byte) (int32, int64, error) {
	b := c.data[c.pos:]
	switch {
	case tag >= 0x80 && tag <= 0xbf:
		return int32(tag) - 0x90, 0, nil
	case tag >= 0xc0 && tag <= 0xcf:
		if len(b) < 1 {
			return 0, 0, c.truncated("an int")
		}
		c.pos++
		return (int32(tag)-0xc8)<<8 + int32(b[0]), 0, nil
	case tag >= 0xd0 && tag <= 0xd7:
		if len(b) < 2 {
			return 0, 0, c.truncated("an int")
		}
		c.pos += 2
		return (int32(tag)-0xd4)<<16 + int32(b[0])<<8 + int32(b[1]), 0, nil
	case tag == tagInt:
		if len(b) < 4 {
			return 0, 0, c.truncated("an int")
		}
		c.pos += 4
		return int32(binary.BigEndian.Uint32(b)), 0, nil
	case tag == tagNull:
		return 0, 0, nil
	}
	return 0, 0, errAt(c.pos-1, "expected an int, found tag 0x%02x", tag)
}

// int32Read is decInt32(TAG_READ): a length, an index, a count.
func (c *validator) int32Read(what string) (int32, error) {
	if c.pos >= len(c.data) {
		return 0, c.truncated(what)
	}
	tag := c.data[c.pos]
	c.pos++
	i, cost, err := c.int32At(tag)
	if err != nil {
		return 0, err
	}
	return i, c.spend(cost)
}

// int64At is decInt64 for the tags DecodeValue gives it, with what it
// allocates beyond the boxing: the buffers of the longer forms.
func (c *validator) int64At(tag byte) (int64, int64, error) {
	b := c.data[c.pos:]
	n := 0
	var v int64
	switch {
	case tag >= 0xd8 && tag <= 0xef:
		return int64(tag) - 0xe0, 0, nil
	case tag >= 0xf0:
		n = 1
		if len(b) >= n {
			v = (int64(tag)-0xf8)<<8 + int64(b[0])
		}
	case tag >= 0x38 && tag <= 0x3f:
		n = 2
		if len(b) >= n {
			v = (int64(tag)-0x3c)<<16 + int64(b[0])<<8 + int64(b[1])
		}
	case tag == tagLongInt:
		n = 4
		if len(b) >= n {
			v = int64(int32(binary.BigEndian.Uint32(b)))
		}
	default: // 'L'
		n = 8
		if len(b) >= n {
			v = int64(binary.BigEndian.Uint64(b))
		}
	}
	if len(b) < n {
		return 0, 0, c.truncated("a long")
	}
	c.pos += n
	return v, 2 * vcSmallBox, nil
}

// date is decDate for a tag already read.
func (c *validator) date(tag byte) error {
	n := 8
	if tag == tagDateMinute {
		n = 4
	}
	if err := c.need(n, "a date"); err != nil {
		return err
	}
	c.pos += n
	return nil
}

// strValue checks the string at c.pos and charges what decString
// allocates for it: each chunk's buffer of three bytes a character
// (readStringChunkData) and its copy, and, for chunked strings, the chunks'
// list and the joined copy. It returns the string's length.
func (c *validator) strValue() (int, error) {
	total, cost := 0, int64(0)
	var chunks vSlice
	for first := true; ; first = false {
		units, hdr, final, err := stringHeader(c.data, c.pos)
		if err != nil {
			return 0, err
		}
		end, outLen, _, err := scanChars(c.data, c.pos+hdr, units)
		if err != nil {
			return 0, err
		}
		cost += vRoundAlloc(int64(3*units)) + vRoundAlloc(int64(outLen))
		total += outLen
		c.pos = end
		if final {
			if !first {
				cost += chunks.add(24) + vRoundAlloc(int64(total))
			}
			return total, c.spend(cost)
		}
		cost += chunks.add(24)
	}
}

// name is decString(TAG_READ) where the library reads a name (a class,
// field, list or map type, an enum constant): the string it returns, and
// an encoding of it as a string, for the registry probes. Besides strings,
// the library takes null, booleans, ints, longs and some doubles there, as
// text.
func (c *validator) name(what string) (string, []byte, error) {
	if c.pos >= len(c.data) {
		return "", nil, c.truncated(what)
	}
	start := c.pos
	tag := c.data[c.pos]
	if isStringTag(tag) {
		text := c.buf[:0]
		cost := int64(0)
		var chunks vSlice
		for first := true; ; first = false {
			units, hdr, final, err := stringHeader(c.data, c.pos)
			if err != nil {
				return "", nil, err
			}
			end, outLen, _, err := scanChars(c.data, c.pos+hdr, units)
			if err != nil {
				return "", nil, err
			}
			text, _ = appendChars(text, c.data, c.pos+hdr, units)
			cost += vRoundAlloc(int64(3*units)) + vRoundAlloc(int64(outLen))
			c.pos = end
			if final {
				if !first {
					cost += chunks.add(24) + vRoundAlloc(int64(len(text)))
				}
				break
			}
			cost += chunks.add(24)
		}
		c.buf = text
		// Names recur (types, classes, fields): one string each, for the
		// first maxNames of them; past those, a body of distinct names
		// gets one string a name, not a map entry too.
		name, ok := c.names[string(text)]
		if !ok {
			if c.names == nil {
				c.names = map[string]string{}
			}
			name = string(text)
			if len(c.names) < maxNames {
				c.names[name] = name
			}
		}
		return name, c.data[start:c.pos], c.spend(cost)
	}
	c.pos++
	var s string
	switch {
	case tag == tagNull:
	case tag == tagTrue:
		s = "true"
	case tag == tagFalse:
		s = "false"
	case tag >= 0x80 && tag <= 0xd7 || tag == tagInt || tag >= 0xd8 || tag >= 0x38 && tag <= 0x3f || tag == tagLongInt || tag == tagLong:
		v, err := c.nameInt64(tag)
		if err != nil {
			return "", nil, err
		}
		s = strconv.Itoa(int(v))
	case tag == tagDoubleZero:
		s = "0.0"
	case tag == tagDoubleOne:
		s = "1.0"
	case tag == tagDoubleByte:
		if err := c.need(1, what); err != nil {
			return "", nil, err
		}
		s = strconv.FormatFloat(float64(int8(c.data[c.pos])), 'E', -1, 64)
		c.pos++
	case tag == tagDoubleShort:
		if err := c.need(2, what); err != nil {
			return "", nil, err
		}
		s = strconv.FormatFloat(float64(int16(binary.BigEndian.Uint16(c.data[c.pos:]))), 'E', -1, 64)
		c.pos += 2
	default:
		return "", nil, errAt(start, "invalid %s, tag 0x%02x", what, tag)
	}
	// A compact string of the same text (ASCII, under 32 bytes).
	wire := append([]byte{byte(len(s))}, s...)
	return s, wire, c.spend(vRoundAlloc(int64(len(s))) + vcSmallBox)
}

// nameInt64 is decInt64 as decString calls it, with its byte arithmetic
// (a compact int's sign is lost) and its 'I', which reads one more tag.
func (c *validator) nameInt64(tag byte) (int64, error) {
	b := c.data[c.pos:]
	need := func(n int) error {
		if len(b) < n {
			return c.truncated("a name")
		}
		c.pos += n
		return nil
	}
	switch {
	case tag >= 0x80 && tag <= 0xbf:
		return int64(tag - 0x90), nil
	case tag >= 0xc0 && tag <= 0xcf:
		if err := need(1); err != nil {
			return 0, err
		}
		return int64(tag-0xc8)<<8 + int64(b[0]), nil
	case tag >= 0xd0 && tag <= 0xd7:
		if err := need(2); err != nil {
			return 0, err
		}
		return int64(tag-0xd4)<<16 + int64(b[0])<<8 + int64(b[1]), nil
	case tag == tagInt:
		i, err := c.int32Read("a name")
		return int64(i), err
	}
	v, cost, err := c.int64At(tag)
	if err != nil {
		return 0, err
	}
	return v, c.spend(cost)
}

// binary checks the binary value at c.pos and charges decBinary: its
// buffer growing from 128 bytes by append, the pooled 64 KiB chunk buffer
// once, the slice put in an interface.
func (c *validator) binary() (lv, error) {
	end, total, err := skipBinary(c.data, c.pos)
	if err != nil {
		return lvNil, err
	}
	// make([]byte, 0, 128); the pool's slice header (AcquireBytes
	// returns a new pointer to it); the []byte boxed.
	cost := int64(128 + 2*vcSliceHdr + 8) // 8: measured, the pool's
	if !c.binaryPool {
		c.binaryPool = true
		cost += vcBinaryPool
	}
	n, cp := 0, 128
	for p := c.pos; p < end; {
		k, hdr, _, _ := binaryHeader(c.data, p)
		if n+k > cp {
			var b int64
			cp, b = vGrowCap(n+k, cp, 1)
			cost += b
		}
		n += k
		p += hdr + k
	}
	c.pos = end
	return lv{t: vtBytes, list: -1, n: total}, c.spend(cost)
}

// ref is decRef: 'Q' and the index of a list, map or object the library
// has recorded. The library panics on a negative index and reads one past
// its records as nil.
func (c *validator) ref() (lv, error) {
	at := c.pos
	c.pos++
	i, err := c.int32Read("a reference")
	if err != nil {
		return lvNil, err
	}
	if i < 0 || int(i) >= c.refs.len() {
		return lvNil, errAt(at, "reference %d to one of %d lists, maps and objects", i, c.refs.len())
	}
	return c.unpackRef(*c.refs.at(int(i))), nil
}

// count checks a declared count against the bytes that remain, each
// element taking one at least. The library makes its slices at the count
// before reading any element, and panics on a negative one.
func (c *validator) count(n int32, what string) (int, error) {
	if n < 0 {
		return 0, errAt(c.pos, "%s of negative length %d", what, n)
	}
	if int(n) > len(c.data)-c.pos {
		return 0, errAt(c.pos, "%s of %d elements, only %d bytes remain", what, n, len(c.data)-c.pos)
	}
	return int(n), nil
}

// untypedList is readUntypedList: x57 (to 'Z'), x58 (int length), x78-x7f.
func (c *validator) untypedList(depth int) (lv, error) {
	if err := c.enter(depth); err != nil {
		return lvNil, err
	}
	tag := c.data[c.pos]
	c.pos++
	variable := tag == tagUListVar
	n := 0
	if !variable {
		n32 := int32(tag) - 0x78
		if tag == tagUListFixed {
			var err error
			if n32, err = c.int32Read("a list length"); err != nil {
				return lvNil, err
			}
		}
		var err error
		if n, err = c.count(n32, "list"); err != nil {
			return lvNil, err
		}
	}
	// make([]any, n), the slice put in an interface for reflect.ValueOf.
	if err := c.spend(vRoundAlloc(int64(n)*16) + vcSliceHdr); err != nil {
		return lvNil, err
	}
	li, err := c.addList(reflect.TypeFor[[]any](), n)
	if err != nil {
		return lvNil, err
	}
	return c.elements(li, nil, n, variable, depth)
}

// elements reads a list's elements into list li, as readUntypedList and
// readTypedListValue do: a fixed list's into the slice made at its length
// (SetValue for a typed one, elem its element type), a variable list's by
// reflect.Append up to its 'Z'.
func (c *validator) elements(li int, elem reflect.Type, n int, variable bool, depth int) (lv, error) {
	var grown vSlice
	var size int64 = 16
	if elem != nil {
		size = int64(elem.Size())
	}
	for j := 0; j < n || variable; j++ {
		if c.pos >= len(c.data) {
			return lvNil, c.truncated("a list")
		}
		if variable && c.data[c.pos] == tagEnd {
			c.pos++
			break
		}
		at := c.pos
		it, err := c.value(depth + 1)
		if err != nil {
			return lvNil, err
		}
		src := c.rawType(it)
		if variable {
			// reflect.Append(list, EnsureRawValue(it)), or the zero
			// element for nil: it needs a valid value of a type
			// assignable to the element's.
			if !it.isNil() {
				if src == nil {
					return lvNil, errAt(at, "a reference to a list emptied by a conversion, appended to a list (the library panics)")
				}
				if elem != nil && !src.AssignableTo(elem) {
					return lvNil, errAt(at, "a %s element in a list of %s (the library panics)", src, elem)
				}
			} else {
				src = nil
			}
			if err := c.spend(grown.add(size) + vcSliceHdr); err != nil {
				return lvNil, err
			}
			c.lists.at(li).n++
		} else if elem == nil && it.list >= 0 {
			// list[j] = EnsureRawAny(it): the list's reflect.Value boxed.
			if err := c.spend(vcValueBox); err != nil {
				return lvNil, err
			}
		} else if elem != nil && !it.isNil() && src != nil {
			// SetValue(list[j], EnsureRawValue(it)).
			ok, alloc := vSetOK(elem, src)
			if !ok {
				return lvNil, errAt(at, "a %s element in a list of %s (the library panics)", src, elem)
			}
			if err := c.spend(alloc); err != nil {
				return lvNil, err
			}
		}
		if it.isNil() {
			src = nil
		}
		c.noteElem(li, src)
	}
	return lv{list: int32(li), fresh: true}, nil
}

// typedList is readTypedList: x55 (to 'Z'), 'V' (int length), x70-x77.
func (c *validator) typedList(depth int) (lv, error) {
	if err := c.enter(depth); err != nil {
		return lvNil, err
	}
	at := c.pos
	tag := c.data[c.pos]
	c.pos++
	name, wire, err := c.name("list type")
	if err != nil {
		return lvNil, err
	}
	variable := tag == tagListVar
	var n32 int32
	switch {
	case tag >= 0x70 && tag <= 0x77:
		n32 = int32(tag) - 0x70
	case tag == tagListFixed:
		if n32, err = c.int32Read("a list length"); err != nil {
			return lvNil, err
		}
	}
	n, err := c.count(n32, "list")
	if err != nil {
		return lvNil, err
	}
	// isCollectionSerialize comes first, then a type reference for a name
	// strconv.Atoi reads.
	ref, isRef := 0, false
	if vNumeric(name) {
		if r, err := strconv.Atoi(name); err == nil {
			ref, isRef = r, true
		}
	}
	var arr reflect.Type
	if !isRef {
		if arr, err = c.listType(at, name, wire); err != nil {
			return lvNil, err
		}
		if arr.Kind() != reflect.Slice {
			return c.collection(arr, n, depth)
		}
		c.addType(name, arr)
	} else {
		if ref < 0 {
			return lvNil, errAt(at, "list type reference %d (the library panics)", ref)
		}
		if ref >= len(c.types) {
			return lvNil, errAt(at, "list type reference %d to one of %d types", ref, len(c.types))
		}
		arr = c.types[ref]
		if arr.Kind() != reflect.Slice {
			return lvNil, errAt(at, "list typed by a map's type (the library panics)")
		}
	}
	// reflect.MakeSlice: the array and its heap header.
	size := int64(arr.Elem().Size())
	if err := c.spend(vRoundAlloc(int64(n)*size) + vcSliceHdr); err != nil {
		return lvNil, err
	}
	li, err := c.addList(arr, n)
	if err != nil {
		return lvNil, err
	}
	return c.elements(li, arr.Elem(), n, variable, depth)
}

// vNumeric tells the names strconv.Atoi may read (a sign and digits),
// without the error it makes of the others.
func vNumeric(s string) bool {
	if s != "" && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// collection is decodeCollection: a typed list whose type names a
// collection registered with SetCollectionSerialize decodes into it, its
// elements read as a fixed list of type "" (whatever its tag said, x55
// included) into a []any.
func (c *validator) collection(ptr reflect.Type, n, depth int) (lv, error) {
	arr, err := c.listType(c.pos, "", []byte{0})
	if err != nil {
		return lvNil, err
	}
	if arr.Kind() != reflect.Slice || arr.Elem().Kind() != reflect.Interface || arr.Elem().NumMethod() != 0 {
		return lvNil, errAt(c.pos, "a collection's elements would decode into %s, not []any", arr)
	}
	c.addType("", arr)
	if err := c.spend(vRoundAlloc(int64(ptr.Elem().Size())) + vRoundAlloc(int64(n)*16) + vcSliceHdr); err != nil {
		return lvNil, err
	}
	li, err := c.addList(arr, n)
	if err != nil {
		return lvNil, err
	}
	if _, err := c.elements(li, arr.Elem(), n, false, depth); err != nil {
		return lvNil, err
	}
	return lvOf(ptr), nil
}

// addType is TypeRefs.appendTypeRefs.
func (c *validator) addType(name string, t reflect.Type) {
	if c.typeNames[name] {
		return
	}
	if c.typeNames == nil {
		c.typeNames = map[string]bool{}
	}
	// The records map and the types slice; a failed spend shows at the
	// next value.
	c.left -= vMapGrowthSlot(len(c.typeNames), 17) + c.ntypes.add(16)
	c.typeNames[name] = true
	c.types = append(c.types, t)
}

// listType is getListType(name) for a name that is not a type reference:
// asked of the library itself (see vProbe).
func (c *validator) listType(at int, name string, wire []byte) (reflect.Type, error) {
	t, ok := c.listTypes[name]
	if !ok {
		var err error
		if t, err = c.probeList(at, name, wire); err != nil {
			return nil, err
		}
	}
	// strconv.Atoi's error (a *NumError and a copy of the name), then
	// getListType's reflect.SliceOf boxing its cache key at each
	// dimension, and for a registered class's list a value of the class.
	cost := 48 + vRoundAlloc(int64(len(name))) + int64(32*max(1, len(name)-len(strings.TrimLeft(name, "["))))
	if t.Kind() == reflect.Slice {
		if e := t.Elem(); e.Kind() == reflect.Pointer {
			cost += vRoundAlloc(int64(e.Elem().Size()))
		}
	}
	return t, c.spend(cost)
}

func (c *validator) probeList(at int, name string, wire []byte) (reflect.Type, error) {
	if dims := len(name) - len(strings.TrimLeft(name, "[")); dims > maxListDims {
		return nil, errAt(at, "list type of %d dimensions (at most %d)", dims, maxListDims)
	}
	// A typed list of no elements of that name: the library returns its
	// slice (or the collection, for a collection's name).
	v, err := vProbe(append([]byte{0x70}, wire...))
	if err != nil {
		return nil, errAt(at, "list type %s: %v", quote(name), err)
	}
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Slice && t.Kind() != reflect.Pointer {
		return nil, errAt(at, "list type %s decodes into %v", quote(name), t)
	}
	if c.listTypes == nil {
		c.listTypes = map[string]reflect.Type{}
	}
	c.listTypes[name] = t
	return t, nil
}

// registered is getStructInfo(name).typ, nil for a name nobody registered:
// asked of the library itself (see vProbe).
func (c *validator) registered(at int, name string, wire []byte) (reflect.Type, error) {
	if t, ok := c.probes[name]; ok {
		return t, nil
	}
	if len(wire) == 0 || !isStringTag(wire[0]) {
		wire = append([]byte{byte(len(name))}, name...)
	}
	// A typed map of no entries of that type: the library returns a value
	// of the registered type, or a map[any]any.
	v, err := vProbe(append(append([]byte{tagMap}, wire...), tagEnd))
	if err != nil {
		return nil, errAt(at, "class %s: %v", quote(name), err)
	}
	t := reflect.TypeOf(v)
	if t == vtAnyMap {
		t = nil
	}
	if c.probes == nil {
		c.probes = map[string]reflect.Type{}
	}
	c.probes[name] = t
	return t, nil
}

// vProbe decodes a few bytes with the library: how check learns what its
// registry (the library's, process-wide, which RegisterPOJO fills and which
// offers no lookup) makes of a name. A new small Decoder each time: Reset
// keeps the list holders of earlier decodes.
func vProbe(b []byte) (v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errAt(0, "the library panics on it")
		}
	}()
	v, err = hessian.NewDecoderSize(b, 16).Decode()
	if err == io.EOF {
		err = nil
	}
	return v, err
}

// untypedMap is decMap's 'H': map[any]any, its keys and values each read
// by Decode (which patches list references after each).
func (c *validator) untypedMap(depth int) (lv, error) {
	if err := c.enter(depth); err != nil {
		return lvNil, err
	}
	c.pos++
	if err := c.addRef(lvOf(vtAnyMap), false); err != nil {
		return lvNil, err
	}
	if err := c.spend(costMapHeader); err != nil {
		return lvNil, err
	}
	// Distinct keys are not known without their values: each entry is
	// charged as new, which a map of repeated keys only overpays.
	n := 0
	for {
		if c.pos >= len(c.data) {
			return lvNil, c.truncated("a map")
		}
		if c.data[c.pos] == tagEnd {
			c.pos++
			return lvOf(vtAnyMap), nil
		}
		at := c.pos
		k, err := c.decode(depth + 1)
		if err != nil {
			return lvNil, err
		}
		if _, err := c.decode(depth + 1); err != nil {
			return lvNil, err
		}
		if k.t != nil && !k.t.Comparable() {
			return lvNil, errAt(at, "map key of type %s (the library panics: unhashable)", k.t)
		}
		if err := c.spend(mapGrowth(n)); err != nil {
			return lvNil, err
		}
		n++
	}
}

// typedMap is decMap's 'M': its type (decMapType: a name, recorded in the
// type references, or a reference to one) is a registered class or
// map[any]any; entries are set by reflection.
func (c *validator) typedMap(depth int) (lv, error) {
	if err := c.enter(depth); err != nil {
		return lvNil, err
	}
	at := c.pos
	c.pos++
	if c.pos >= len(c.data) {
		return lvNil, c.truncated("a map type")
	}
	var typ reflect.Type
	if isStringTag(c.data[c.pos]) {
		name, wire, err := c.name("map type")
		if err != nil {
			return lvNil, err
		}
		if typ, err = c.registered(at, name, wire); err != nil {
			return lvNil, err
		}
		if typ == nil {
			typ = vtAnyMap
		}
		c.addType(name, typ)
	} else {
		i, err := c.int32Read("a map type")
		if err != nil {
			return lvNil, err
		}
		if i < 0 {
			return lvNil, errAt(at, "map type reference %d (the library panics)", i)
		}
		if int(i) >= len(c.types) {
			return lvNil, errAt(at, "map type reference %d to one of %d types", i, len(c.types))
		}
		typ = c.types[i]
	}
	var v lv
	if typ.Kind() == reflect.Slice {
		// A list's type: its (nil) value goes in a holder.
		li, err := c.addList(typ, 0)
		if err != nil {
			return lvNil, err
		}
		v = lv{list: int32(li)}
	} else {
		v = lvOf(typ)
		if err := c.addRef(v, true); err != nil {
			return lvNil, err
		}
	}
	if err := c.spend(costMapHeader + vRoundAlloc(int64(typ.Size()))); err != nil {
		return lvNil, err
	}
	n := 0
	for {
		if c.pos >= len(c.data) {
			return lvNil, c.truncated("a map")
		}
		if c.data[c.pos] == tagEnd {
			c.pos++
			return lvOf(typ), nil
		}
		at := c.pos
		if typ.Kind() == reflect.Struct {
			if err := c.structEntry(typ, depth); err != nil {
				return lvNil, err
			}
			continue
		}
		if typ.Kind() != reflect.Map {
			// FieldByName panics on any other type.
			return lvNil, errAt(at, "entries in a typed map of type %s (the library panics)", typ)
		}
		k, err := c.decode(depth + 1)
		if err != nil {
			return lvNil, err
		}
		val, err := c.decode(depth + 1)
		if err != nil {
			return lvNil, err
		}
		// SetMapIndex(reflect.ValueOf(k), EnsureRawValue(v)): a nil
		// value deletes the key, a nil key panics.
		if k.t == nil {
			return lvNil, errAt(at, "null key in a typed map (the library panics)")
		}
		if !k.t.AssignableTo(typ.Key()) || !k.t.Comparable() {
			return lvNil, errAt(at, "map key of type %s in a map of %s (the library panics)", k.t, typ)
		}
		if val.t != nil && !val.t.AssignableTo(typ.Elem()) {
			return lvNil, errAt(at, "map value of type %s in a map of %s (the library panics)", val.t, typ)
		}
		slot := int64(typ.Key().Size() + typ.Elem().Size())
		if err := c.spend(vMapGrowthSlot(n, slot) + 2*vcStringBox); err != nil {
			return lvNil, err
		}
		n++
	}
}

// structEntry is an entry of a typed map whose type is a registered
// struct: the library sets the field its key names, by its Go name
// (reflect's FieldByName), to the value, and skips keys naming none.
func (c *validator) structEntry(typ reflect.Type, depth int) error {
	at := c.pos
	if !isStringTag(c.data[c.pos]) {
		// Decoded first, then refused: not a string.
		if _, err := c.decode(depth + 1); err != nil {
			return err
		}
		return errAt(at, "a typed map of type %s with a key that is not a string", typ)
	}
	key, _, err := c.name("map key")
	if err != nil {
		return err
	}
	if err := c.notify(); err != nil {
		return err
	}
	val, err := c.decode(depth + 1)
	if err != nil {
		return err
	}
	f, ok := typ.FieldByName(key)
	if !ok {
		return nil
	}
	if f.PkgPath != "" || len(f.Index) > 1 {
		// Unexported fields cannot be set; an embedded struct may be
		// reached through a nil pointer.
		return errAt(at, "map key %s names field %s of %s, which the library cannot set (it panics)", quote(key), f.Name, typ)
	}
	if val.t == nil || !val.t.AssignableTo(f.Type) {
		return errAt(at, "a %v for field %s of %s (the library panics)", val.t, f.Name, typ)
	}
	return c.spend(vcStringBox + 32)
}

// object is decObject: 'C' (a class definition, and the value after it),
// 'O' int and x60-x6f (an object of a class defined before).
func (c *validator) object(depth int) (lv, error) {
	if err := c.enter(depth); err != nil {
		return lvNil, err
	}
	at := c.pos
	tag := c.data[c.pos]
	c.pos++
	if tag == tagClassDef {
		if err := c.classDef(at); err != nil {
			return lvNil, err
		}
		if c.pos >= len(c.data) {
			return lvNil, c.truncated("a class definition: its object is missing")
		}
		return c.value(depth + 1)
	}
	idx := int32(tag) - 0x60
	if tag == tagObject {
		var err error
		if idx, err = c.int32Read("a class index"); err != nil {
			return lvNil, err
		}
	}
	if idx < 0 || int(idx) >= c.classes.len() {
		return lvNil, errAt(at, "object of undefined class %d (%d defined)", idx, c.classes.len())
	}
	cls := c.classes.at(int(idx))
	if err := c.resolve(at, cls); err != nil {
		return lvNil, err
	}
	switch cls.kind {
	case clsMap:
		return c.objectMap(cls, depth)
	case clsEnum:
		// decEnum reads one name, whatever the class's fields, and
		// records the constant after it.
		if _, _, err := c.name("enum constant"); err != nil {
			return lvNil, err
		}
		v := lvOf(reflect.PointerTo(c.typeOf(cls.typ)))
		if err := c.addRef(v, false); err != nil {
			return lvNil, err
		}
		return v, c.spend(64 + vRoundAlloc(int64(c.typeOf(cls.typ).Size())))
	case clsSQLTime:
		// JavaSqlTimeSerializer reads one date (or null), whatever the
		// class's fields.
		v := lvOf(reflect.PointerTo(c.typeOf(cls.typ)))
		if err := c.addRef(v, false); err != nil {
			return lvNil, err
		}
		if err := c.need(1, "a date"); err != nil {
			return lvNil, err
		}
		switch t := c.data[c.pos]; t {
		case tagNull:
			c.pos++
		case tagDate, tagDateMinute:
			c.pos++
			if err := c.date(t); err != nil {
				return lvNil, err
			}
		default:
			name, _ := c.className(cls)
			return lvNil, errAt(c.pos, "%s of tag 0x%02x, not a date", quote(name), t)
		}
		return v, c.spend(vRoundAlloc(int64(c.typeOf(cls.typ).Size())) + vcSmallBox)
	}
	return c.instance(cls, depth)
}

// classDef is decClassDef: 'C' name int field-name*, recorded for the
// objects after it. The library makes the field list at its count before
// reading a name, and panics on a negative count.
func (c *validator) classDef(at int) error {
	nameAt := c.pos
	if _, _, err := c.name("class name"); err != nil {
		return err
	}
	n32, err := c.int32Read("a field count")
	if err != nil {
		return err
	}
	n, err := c.count(n32, "class definition")
	if err != nil {
		return err
	}
	if err := c.spend(vRoundAlloc(int64(n)*16) + vcClassInfo + c.nclasses.add(8)); err != nil {
		return err
	}
	cls := lvClass{nameAt: int32(nameAt), fieldAt: int32(c.fieldNames.len()), nfields: int32(n)}
	count := 0
	seen := make(map[string]bool, n+1)
	seen[hessian.ClassKey] = true
	cls.distinct = 1
	for range n {
		f, _, err := c.name("field name")
		if err != nil {
			return err
		}
		c.fieldNames.push(f)
		switch f {
		case "detailMessage", "suppressedExceptions", "stackTrace", "cause":
			count++ // checkAndGetException counts repeats too
		}
		// The entries of its objects as maps (decClassToMap): "_class"
		// and each name once.
		if !seen[f] {
			seen[f] = true
			cls.distinct++
		}
	}
	cls.exception = count == 4
	c.classes.push(cls)
	return nil
}

// field is class cls's field i.
func (c *validator) field(cls *lvClass, i int) string {
	return *c.fieldNames.at(int(cls.fieldAt) + i)
}

// className is cls's name and its encoding, as a string decString reads
// as name, read again (uncharged: classDef paid for it).
func (c *validator) className(cls *lvClass) (string, []byte) {
	pos, left := c.pos, c.left
	c.pos = int(cls.nameAt)
	name, wire, _ := c.name("class name")
	c.pos, c.left = pos, left
	return name, wire
}

// resolve finds what the library decodes a class's objects into
// (getStructDefByIndex, then decObject's choice), once per definition.
func (c *validator) resolve(at int, cls *lvClass) error {
	if cls.resolved {
		return nil
	}
	name, wire := c.className(cls)
	typ, err := c.registered(at, name, wire)
	if err != nil {
		return err
	}
	if typ == nil {
		if !cls.exception {
			cls.kind, cls.resolved = clsMap, true
			return nil
		}
		// checkAndGetException registers the class, for good.
		if err := c.exception(at, name); err != nil {
			return err
		}
		typ = vtUnknownExc
	}
	cls.typ = c.tid(typ)
	switch {
	case typ.Implements(vtPOJOEnum):
		cls.kind = clsEnum
	default:
		if s, ok := hessian.GetSerializer(name); ok {
			switch s.(type) {
			case hessian.JavaSqlTimeSerializer:
				cls.kind = clsSQLTime
			case hessian.IntegerSerializer:
				cls.kind = clsInteger
			case hessian.DecimalSerializer:
				cls.kind = clsDecimal
			default:
				return errAt(at, "class %s has a serializer (%T) whose decoding the validator does not know", quote(name), s)
			}
			if typ.Kind() != reflect.Struct {
				return errAt(at, "class %s registered as %s, which its serializer does not decode", quote(name), typ)
			}
			break
		}
		if typ.Kind() != reflect.Struct {
			return errAt(at, "class %s registered as %s: the library decodes objects into structs only", quote(name), typ)
		}
		cls.kind = clsInstance
	}
	cls.resolved = true
	return nil
}

// objectMap is decClassToMap: an object of a class nobody registered, a
// map[string]any of its fields (made at their count) and "_class".
func (c *validator) objectMap(cls *lvClass, depth int) (lv, error) {
	v := lvOf(vtStringMap)
	if err := c.addRef(v, false); err != nil {
		return lvNil, err
	}
	distinct := int(cls.distinct)
	hint := int(cls.nfields)
	cost := vcObjectMap + presizedMapCost(hint, costMapSlot)
	if hint <= mapGroup {
		cost = vcObjectMap + costMapHeader
		for i := range distinct {
			cost += mapGrowth(i)
		}
	} else if slots := mapSlotsFor(hint); distinct > slots*7/8 {
		cost += int64(slots) * costMapSlot
	}
	if err := c.spend(cost); err != nil {
		return lvNil, err
	}
	for range cls.nfields {
		f, err := c.value(depth + 1)
		if err != nil {
			return lvNil, err
		}
		if _, err := c.rawAny(f); err != nil {
			return lvNil, err
		}
	}
	return v, nil
}

// instance is decInstance: a new value of the registered struct, recorded
// before its fields, each field the class names set by decToDest if the Go
// type has it (findField), its value skipped if not, and nothing read at
// all for an unexported one.
func (c *validator) instance(cls *lvClass, depth int) (lv, error) {
	typ := c.typeOf(cls.typ)
	v := lvOf(reflect.PointerTo(typ))
	if err := c.addRef(v, false); err != nil {
		return lvNil, err
	}
	if err := c.spend(vRoundAlloc(int64(typ.Size()))); err != nil {
		return lvNil, err
	}
	at := c.pos
	digits := []byte{0} // a BigDecimal's Value: "" unless set
	for i := range int(cls.nfields) {
		f := c.field(cls, i)
		field, found, err := c.findField(typ, f)
		if err != nil {
			return lvNil, err
		}
		if !found {
			if _, err := c.value(depth + 1); err != nil {
				return lvNil, err
			}
			continue
		}
		if field.PkgPath != "" {
			continue
		}
		start := c.pos
		if err := c.decToDest(field.Type, depth+1); err != nil {
			return lvNil, err
		}
		if cls.kind == clsDecimal && field.Name == "Value" && isStringTag(c.data[start]) {
			digits = c.data[start:c.pos]
		}
	}
	if cls.kind == clsInteger {
		// FromSignAndMag: bytes of the magnitude, and the big.Int.
		if err := c.spend(256); err != nil {
			return lvNil, err
		}
	}
	if cls.kind == clsDecimal {
		// DecimalSerializer parses Value, and fails the decoding on what
		// is not a number: asked of the library itself.
		name, wire := c.className(cls)
		b := append([]byte{tagClassDef}, wire...)
		b = append(append(b, 0x91, 0x05), "value"...)
		b = append(append(b, 0x60), digits...)
		if _, err := vProbe(b); err != nil {
			return lvNil, errAt(at, "%s: %v", quote(name), err)
		}
		if err := c.spend(256 + 2*vRoundAlloc(int64(len(digits)))); err != nil {
			return lvNil, err
		}
	}
	return v, nil
}

type vFieldKey struct {
	typ  reflect.Type
	name string
}

type vFieldRes struct {
	field reflect.StructField
	found bool
}

// findField is the library's findFieldWithCache: the first field, in
// order, whose hessian tag, name, lowerCamelCase name or lower-case name is
// name, looking into embedded structs. The library caches each name it is
// asked, found or not, for good: names not found count toward a
// process-wide bound (committed with the body).
func (c *validator) findField(typ reflect.Type, name string) (reflect.StructField, bool, error) {
	key := vFieldKey{typ, name}
	if r, ok := c.fieldSeen[key]; ok {
		cost := int64(0)
		if !r.found {
			cost += vcErrorf
		}
		return r.field, r.found, c.spend(cost)
	}
	f, found := libFindField(name, typ)
	if c.fieldSeen == nil {
		c.fieldSeen = map[vFieldKey]vFieldRes{}
	}
	c.fieldSeen[key] = vFieldRes{f, found}
	cost := int64(vcFieldStore) + int64(typ.NumField())*vcFieldScan
	if !found {
		cost += vcErrorf
		c.pendingFields = append(c.pendingFields, key)
	}
	return f, found, c.spend(cost)
}

func libFindField(name string, typ reflect.Type) (reflect.StructField, bool) {
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		tag, hasTag := f.Tag.Lookup("hessian")
		if hasTag && tag == name || f.Name == name || vLowerCamel(f.Name) == name || strings.ToLower(f.Name) == name {
			return f, true
		}
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			if sub, ok := libFindField(name, f.Type); ok {
				return sub, true
			}
		}
	}
	return reflect.StructField{}, false
}

func vLowerCamel(s string) string {
	r := []rune(s)
	r[0] = unicode.ToLower(r[0])
	return string(r)
}

// decToDest reads a field of a registered struct into a field of type dst
// (decToDest): a map field by decMapByValue, a slice or array field by
// decList and SetSlice, anything else by DecodeValue and SetValue.
func (c *validator) decToDest(dst reflect.Type, depth int) error {
	raw := vUnpackPtr(dst)
	switch raw.Kind() {
	case reflect.Map:
		return c.mapField(dst, raw, depth)
	case reflect.Slice, reflect.Array:
		return c.sliceField(dst, raw, depth)
	}
	at := c.pos
	v, err := c.value(depth)
	if err != nil || v.isNil() {
		return err
	}
	if v.list >= 0 && v.fresh {
		return c.unpackRefHolder(at, dst, raw, int(v.list))
	}
	return c.setValue(at, dst, v)
}

// setValue is SetValue(dst, EnsurePackValue(v)): a list (a reference to
// one) becomes a destination its holder sets after every Decode.
func (c *validator) setValue(at int, dst reflect.Type, v lv) error {
	if v.list >= 0 {
		return c.addDest(at, int(v.list), dst)
	}
	if v.t == nil {
		return nil
	}
	ok, alloc := vSetOK(dst, v.t)
	if !ok {
		return errAt(at, "a %s for a field of type %s (the library panics)", v.t, dst)
	}
	return c.spend(alloc)
}

// addDest is _refHolder.add: from the next Decode on, the library sets a
// place of type dst to list li's value, whatever the value is by then.
func (c *validator) addDest(at, li int, dst reflect.Type) error {
	l := c.lists.at(li)
	var alloc int64
	if t := c.typeOf(l.t); t != nil {
		ok, a := vSetOK(dst, t)
		if !ok {
			return errAt(at, "a reference to a %s for a place of type %s (the library panics)", t, dst)
		}
		alloc = a
	}
	d := &c.extra(l).d
	d.types.push(c.tid(dst))
	c.dests++
	d.alloc += alloc
	c.notifyAlloc += alloc
	return c.spend(d.n.add(24))
}

// unpackRefHolder converts list li (just read) for a place of type dest
// whose slice type is destTyp (ConvertSliceValueType), sets it (SetValue),
// makes the converted list the holder's value, and sets every place
// references to it went (notify).
func (c *validator) unpackRefHolder(at int, dest, destTyp reflect.Type, li int) error {
	l := c.lists.at(li)
	lt := c.typeOf(l.t)
	nt, err := c.convertList(at, destTyp, lt, int(l.n), c.elemsOf(l), l.many, l.hasNil)
	if err != nil {
		return err
	}
	// convertList records nothing: l is still valid.
	if nt != nil {
		ok, alloc := vSetOK(dest, nt)
		if !ok {
			return errAt(at, "a %s for a field of type %s (the library panics)", nt, dest)
		}
		if err := c.spend(alloc); err != nil {
			return err
		}
	}
	if nt == lt {
		return nil
	}
	// The holder's value changes: its element record too.
	if nt != nil && nt.Elem().Kind() == reflect.Interface {
		elems, many := c.elemsOf(l), l.many
		if lt.Elem().Kind() != reflect.Interface {
			elems, many = []reflect.Type{vUnpackIf(lt.Elem(), false)}, false
		} else {
			for i, e := range elems {
				elems[i] = vUnpackIf(e, false)
			}
		}
		c.setElems(l, elems, many)
	} else {
		c.setElems(l, nil, false)
	}
	l.t = c.tid(nt)
	if l.x < 0 || c.listX[l.x].d.types.len() == 0 {
		return nil
	}
	// notify sets its destinations now, and after every Decode, to the
	// new value.
	d := &c.listX[l.x].d
	c.notifyAlloc -= d.alloc
	d.alloc = 0
	for i := range d.types.len() {
		if nt == nil {
			continue
		}
		dt := c.typeOf(*d.types.at(i))
		ok, a := vSetOK(dt, nt)
		if !ok {
			return errAt(at, "a list converted to %s, referred to from a place of type %s (the library panics)", nt, dt)
		}
		d.alloc += a
	}
	c.notifyAlloc += d.alloc
	return c.spend(d.alloc)
}

// vUnpackIf is the type an item keeps in ConvertSliceValueType: pointers
// followed to their pointee unless the destination's elements are
// pointers (UnpackPtrValue).
func vUnpackIf(t reflect.Type, ptr bool) reflect.Type {
	if ptr {
		return t
	}
	return vUnpackPtr(t)
}

// convertList is ConvertSliceValueType(destTyp, a list of type src and n
// elements): the type of the value it returns, nil for its zero value
// (an empty list), or the error of the library's error or panic.
func (c *validator) convertList(at int, destTyp, src reflect.Type, n int, elems []reflect.Type, many, hasNil bool) (reflect.Type, error) {
	if src == nil {
		return nil, errAt(at, "a list emptied by a conversion, converted again (the library panics)")
	}
	if destTyp == src || destTyp.Kind() == reflect.Interface {
		return src, nil
	}
	if k := src.Kind(); k != reflect.Slice && k != reflect.Array {
		return nil, errAt(at, "a %s for a field of type %s", src, destTyp)
	}
	if n <= 0 {
		return nil, nil
	}
	if destTyp.Kind() != reflect.Slice {
		return nil, errAt(at, "a list for a field of type %s (the library panics)", destTyp)
	}
	de := destTyp.Elem()
	ptr := de.Kind() == reflect.Pointer
	var items []reflect.Type
	se := src.Elem()
	if se.Kind() == reflect.Interface {
		if many && !(de.Kind() == reflect.Interface && de.NumMethod() == 0) {
			return nil, errAt(at, "a list of elements of many types for a field of type %s", destTyp)
		}
		items = elems
	} else {
		// A nil pointer element stays one (UnpackPtrValue stops at it):
		// set as it is only into its own type or an interface.
		if hasNil && se.Kind() == reflect.Pointer && de != se && !(de.Kind() == reflect.Interface && se.AssignableTo(de)) {
			return nil, errAt(at, "a list of %s with null elements for a field of type %s (the library panics)", src, destTyp)
		}
		items = []reflect.Type{se}
	}
	for _, it := range items {
		u := vUnpackIf(it, ptr)
		ok := false
		switch {
		case vFloatKind(de.Kind()):
			ok = vFloatKind(u.Kind())
		case vIntKind(de.Kind()):
			ok = vIntKind(u.Kind())
		case vUintKind(de.Kind()):
			ok = vUintKind(u.Kind())
		default:
			ok, _ = vSetOK(de, u)
		}
		if !ok {
			return nil, errAt(at, "a list of %s elements for a field of type %s (the library panics)", it, destTyp)
		}
	}
	// MakeSlice, each element taken out (boxed) and set.
	cost := vRoundAlloc(int64(n)*int64(de.Size())) + vcSliceHdr + int64(n)*(16+vRoundAlloc(int64(se.Size())))
	return destTyp, c.spend(cost)
}

// sliceField is decToDest's slice and array case: decList, then SetSlice.
func (c *validator) sliceField(dst, destTyp reflect.Type, depth int) error {
	at := c.pos
	if c.pos >= len(c.data) {
		return c.truncated("a list")
	}
	var v lv
	var err error
	switch tag := c.data[c.pos]; {
	case tag == tagNull:
		c.pos++
		return nil
	case tag == tagRef:
		v, err = c.ref()
	case tag >= 0x70 && tag <= 0x77 || tag == tagListFixed || tag == tagListVar:
		v, err = c.typedList(depth)
	case tag >= 0x78 && tag <= 0x7f || tag == tagUListFixed || tag == tagUListVar:
		v, err = c.untypedList(depth)
	case tag >= 0x20 && tag <= 0x2f || tag >= 0x34 && tag <= 0x37 || tag == tagBinary || tag == tagBinaryChunk:
		v, err = c.binary()
	default:
		return errAt(c.pos, "list tag 0x%02x for a field of type %s", tag, dst)
	}
	if err != nil || v.isNil() {
		return err
	}
	if destTyp.Elem().Kind() == reflect.Uint8 {
		// dest.Set(EnsureRawValue(objects)).
		src := c.rawType(v)
		if src == nil || !src.AssignableTo(dst) {
			return errAt(at, "a %v for a field of type %s (the library panics)", src, dst)
		}
		return nil
	}
	if v.list >= 0 && v.fresh {
		return c.unpackRefHolder(at, dst, destTyp, int(v.list))
	}
	if v.list >= 0 {
		return c.addDest(at, int(v.list), dst)
	}
	nt, err := c.convertList(at, destTyp, v.t, v.n, nil, false, false)
	if err != nil || nt == nil {
		return err
	}
	ok, alloc := vSetOK(dst, nt)
	if !ok {
		return errAt(at, "a %s for a field of type %s (the library panics)", nt, dst)
	}
	return c.spend(alloc)
}

// mapField is decMapByValue: a map field of a registered struct, made of
// its own type, recorded (as a pointer to it), its entries converted to
// its key and value types. A null key ends it there (its 'Z' and what
// follows read as the next fields); a null value makes the library panic.
func (c *validator) mapField(dst, raw reflect.Type, depth int) error {
	at := c.pos
	if c.pos >= len(c.data) {
		return c.truncated("a map")
	}
	switch tag := c.data[c.pos]; tag {
	case tagNull:
		c.pos++
		return nil
	case tagRef:
		v, err := c.ref()
		if err != nil {
			return err
		}
		return c.setValue(at, dst, v)
	case tagMap:
		c.pos++
		if _, _, err := c.name("map type"); err != nil {
			return err
		}
	case tagUMap:
		c.pos++
	default:
		return errAt(c.pos, "map tag 0x%02x for a field of type %s", tag, dst)
	}
	if err := c.enter(depth); err != nil {
		return err
	}
	if err := c.addRef(lvOf(reflect.PointerTo(raw)), true); err != nil {
		return err
	}
	if err := c.spend(costMapHeader + 2*vcSliceHdr); err != nil {
		return err
	}
	mk, mv := raw.Key(), raw.Elem()
	slot := int64(mk.Size() + mv.Size())
	for n := 0; ; n++ {
		if c.pos >= len(c.data) {
			return c.truncated("a map")
		}
		if c.data[c.pos] == tagEnd {
			c.pos++
			break
		}
		at := c.pos
		k, err := c.value(depth + 1)
		if err != nil {
			return err
		}
		if k.isNil() {
			break
		}
		v, err := c.value(depth + 1)
		if err != nil {
			return err
		}
		// key: EnsurePackValue(k), converted if vConvertible.
		kt := k.t
		if k.list >= 0 {
			kt = vtHolderPtr
		}
		dyn := kt
		if kt != mk && kt.ConvertibleTo(mk) {
			if err := vConvertible(at, kt, mk); err != nil {
				return err
			}
			kt = mk
		}
		if !kt.AssignableTo(mk) || !dyn.Comparable() {
			return errAt(at, "map key of type %s for a map of %s (the library panics)", dyn, raw)
		}
		// value: EnsureRawValue(v), which must be valid.
		vt := c.rawType(v)
		if vt == nil {
			return errAt(at, "null map value for a field of type %s (the library panics)", dst)
		}
		if vt != mv && vt.ConvertibleTo(mv) {
			if err := vConvertible(at, vt, mv); err != nil {
				return err
			}
			vt = mv
		}
		if !vt.AssignableTo(mv) {
			return errAt(at, "map value of type %s for a map of %s (the library panics)", vt, raw)
		}
		if err := c.spend(vMapGrowthSlot(n, slot) + vcMapEntryReflect); err != nil {
			return err
		}
	}
	return nil
}

// vConvertible refuses the conversions reflect's Convert may panic on for
// some values: slices to arrays (and to pointers to arrays) of another
// length.
func vConvertible(at int, from, to reflect.Type) error {
	if from.Kind() == reflect.Slice && (to.Kind() == reflect.Array || to.Kind() == reflect.Pointer && to.Elem().Kind() == reflect.Array) {
		return errAt(at, "a %s converted to %s (the library panics when the lengths differ)", from, to)
	}
	return nil
}

// vSetOK tells whether the library's SetValue(dest, v) sets a place of type
// dst to a valid value of type src without panicking, and what it
// allocates (pointers it makes to match dst).
func vSetOK(dst, src reflect.Type) (bool, int64) {
	if dst == src {
		return true, 0
	}
	vRaw, vDepth := vUnpackDepth(src)
	dRaw, dDepth := vUnpackDepth(dst)
	if dRaw == vRaw {
		var alloc int64
		t := src
		for i := vDepth; i < dDepth; i++ {
			alloc += vRoundAlloc(int64(t.Size())) + 8
			t = reflect.PointerTo(t)
		}
		return true, alloc
	}
	switch k := dst.Kind(); {
	case vFloatKind(k):
		return vFloatKind(src.Kind()), 0
	case vIntKind(k), vUintKind(k):
		return vIntKind(src.Kind()), 0
	case k == reflect.Pointer:
		switch dst {
		case vpInt:
			// SetValueToPtrDest sets a *int to an *int64: a panic.
			return false, 0
		case vpInt8, vpInt16, vpInt32, vpInt64, vpUint8, vpRune:
			// *int32 and *Rune also take a string's first byte, and
			// panic on an empty one: not allowed here.
			return vIntKind(src.Kind()), 8
		case vpUint, vpUint16, vpUint32, vpUint64:
			return vUintKind(src.Kind()), 8
		case vpFloat32, vpFloat64:
			return vFloatKind(src.Kind()), 8
		}
	}
	return src.AssignableTo(dst), 0
}

var (
	vpInt     = reflect.TypeFor[*int]()
	vpInt8    = reflect.TypeFor[*int8]()
	vpInt16   = reflect.TypeFor[*int16]()
	vpInt32   = reflect.TypeFor[*int32]()
	vpInt64   = reflect.TypeFor[*int64]()
	vpUint    = reflect.TypeFor[*uint]()
	vpUint8   = reflect.TypeFor[*uint8]()
	vpUint16  = reflect.TypeFor[*uint16]()
	vpUint32  = reflect.TypeFor[*uint32]()
	vpUint64  = reflect.TypeFor[*uint64]()
	vpFloat32 = reflect.TypeFor[*float32]()
	vpFloat64 = reflect.TypeFor[*float64]()
	vpRune    = reflect.TypeFor[*hessian.Rune]()
)

func vUnpackPtr(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

func vUnpackDepth(t reflect.Type) (reflect.Type, int) {
	d := 0
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
		d++
	}
	return t, d
}

func vIntKind(k reflect.Kind) bool { return k >= reflect.Int && k <= reflect.Int64 }

func vUintKind(k reflect.Kind) bool { return k >= reflect.Uint && k <= reflect.Uint64 }

func vFloatKind(k reflect.Kind) bool { return k == reflect.Float32 || k == reflect.Float64 }

// The library registers, process-wide and for good, a new type for every
// class it meets that has Throwable's four fields and that nobody
// registered (checkAndGetException): a peer naming a new such class in
// every call grows the registry without end. check lets it do so for at
// most maxLibExceptions names, process-wide; past them, objects of such
// classes fail check until the class is registered (hessian.RegisterPOJO),
// which costs the registry nothing more. Names weft registers itself do
// not count (allowException).
var libExceptions = struct {
	sync.Mutex
	names   map[string]bool // true: counted toward the bound
	counted int
}{names: map[string]bool{}}

// allowException lets the library register exception class name by
// itself without counting toward maxLibExceptions: for names weft knows.
func allowException(name string) {
	libExceptions.Lock()
	defer libExceptions.Unlock()
	if libExceptions.names[name] {
		libExceptions.counted--
	}
	libExceptions.names[name] = false
}

// exception records an exception class the library would register, to be
// committed with the body, and fails when the bound is reached already.
func (c *validator) exception(at int, name string) error {
	libExceptions.Lock()
	_, known := libExceptions.names[name]
	full := libExceptions.counted >= maxLibExceptions
	libExceptions.Unlock()
	if known {
		return nil
	}
	if full {
		return errAt(at, "exception class %s is not registered, and the library has registered %d such classes by itself already: register it (hessian.RegisterPOJO)", quote(name), maxLibExceptions)
	}
	for _, p := range c.pendingExceptions {
		if p == name {
			return nil
		}
	}
	c.pendingExceptions = append(c.pendingExceptions, name)
	return c.spend(vcException + 2*int64(len(name)))
}

// The library caches, for good, every field name it looks up in a
// registered type: names a type lacks are bounded process-wide.
var libFieldNames = struct {
	sync.Mutex
	seen  map[vFieldKey]struct{}
	bytes int
}{seen: map[vFieldKey]struct{}{}}

// commit records the process-wide registrations the body makes the
// library do, or fails if they are over the bounds.
func (c *validator) commit() error {
	if len(c.pendingExceptions) > 0 {
		libExceptions.Lock()
		for _, name := range c.pendingExceptions {
			if _, known := libExceptions.names[name]; known {
				continue
			}
			if libExceptions.counted >= maxLibExceptions {
				// Those added stay: the bound is reached either way.
				libExceptions.Unlock()
				return errAt(len(c.data), "exception class %s is not registered, and the library has registered %d such classes by itself already: register it (hessian.RegisterPOJO)", quote(name), maxLibExceptions)
			}
			libExceptions.names[name] = true
			libExceptions.counted++
		}
		libExceptions.Unlock()
	}
	if len(c.pendingFields) > 0 {
		libFieldNames.Lock()
		defer libFieldNames.Unlock()
		for _, k := range c.pendingFields {
			if _, ok := libFieldNames.seen[k]; ok {
				continue
			}
			if len(libFieldNames.seen) >= maxLibFieldNames || libFieldNames.bytes+len(k.name) > maxLibFieldBytes {
				return errAt(len(c.data), "field %s is not in %s, and the library has cached %d such names for good already: add the field to the Go type",
					quote(k.name), k.typ, len(libFieldNames.seen))
			}
			libFieldNames.seen[k] = struct{}{}
			libFieldNames.bytes += len(k.name)
		}
	}
	return nil
}
