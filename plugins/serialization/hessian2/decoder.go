package hessian2

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync/atomic"

	hessian "github.com/apache/dubbo-go-hessian2"
)

// Decoder reads the values of one Hessian stream in order. The values
// themselves are decoded by github.com/apache/dubbo-go-hessian2 (the
// library dubbo-go decodes with, so a program running both shares one class
// registry); this type stands in front of it for what the library does not
// do on hostile bytes:
//
//   - check walks the rest of the body once, building nothing, before the
//     library sees a byte of it: lengths against the bytes that remain,
//     nesting against MaxDepth, references against what exists, and what
//     the library will allocate against the memory budget;
//   - a panic inside the library fails this body only;
//   - the library's losses are made good where a Dubbo peer exposes them
//     (see fixUnknownException).
//
// The leading strings of a Dubbo body (versions, path, method, descriptor)
// and its attachments are read by DecodeString and DecodeStringMap without
// the library where they are plain (see fast.go): measured, the library's
// general path costs more there than weft allows itself (the package
// documentation gives the figure).
type Decoder struct {
	data []byte
	pos  int // the next unread byte

	// checked: check accepted data[libStart:], and the library reads it
	// from there (lib, made when first needed: the fast paths often read
	// the rest of the body without it).
	checked  bool
	lib      *hessian.Decoder
	libStart int   // where in data the library begins
	ends     []int // the end of each value after libStart, from check
	next     int   // the index in ends of lib's next value
	// skip counts values the fast paths read after lib began, which lib
	// must read past (and throw away) before its next value: it keeps the
	// class definitions and references they may have made.
	skip int

	// intern, when set, shares short strings across bodies (see Interner).
	intern *Interner
	// pool, when set, is the memory that every body being decoded at
	// once shares; held is what this one took of it (see Pool).
	pool *Pool
	held int64
	err  error
	// budget is the Go memory the rest of the body may decode into
	// (BudgetFor).
	budget int64
	size   int // len(data) when the budget was set, for the error
	factor int // for the error
}

// NewDecoder returns a decoder of the values in data. data must not change
// while the decoder is in use; decoded values never alias it.
// Decoding allocates at most about BudgetFor(len(data)) bytes; a body that
// would need more fails before any of it is decoded.
func NewDecoder(data []byte) *Decoder {
	d := &Decoder{}
	d.Reset(data)
	return d
}

// Reset makes d a new decoder of data, as NewDecoder would: a protocol
// that allocates a struct per frame anyway keeps the frame's decoder in
// it, one allocation fewer per frame. Release d before.
func (d *Decoder) Reset(data []byte) {
	*d = Decoder{data: data, budget: BudgetFor(len(data)), size: len(data), factor: BudgetFactor}
}

// SetBudgetFactor gives the decoder the budget of another factor (a
// protocol's `decode.factor`, see BudgetFactorFor); call it before the
// first Decode.
func (d *Decoder) SetBudgetFactor(factor int) {
	d.budget, d.factor = BudgetFactorFor(d.size, factor), factor
}

// Decode returns the next value, as the library decodes it (see the package
// documentation), and io.EOF after the last. A 'Z' end marker at the top
// level also reads as io.EOF, as it does with the library. Any other error
// is final: later calls return it again.
func (d *Decoder) Decode() (any, error) {
	if d.err != nil {
		return nil, d.err
	}
	if d.pos >= len(d.data) {
		return nil, io.EOF
	}
	if d.data[d.pos] == tagEnd {
		d.pos++
		return nil, io.EOF
	}
	if !d.checked {
		// Strings and scalars before anything the library must read are
		// read here (see fastdecode.go): they make no class definitions
		// or references, so the library can start after them.
		if isStringTag(d.data[d.pos]) {
			s, end, err := d.str(d.pos)
			if err != nil {
				d.err = err
				return nil, err
			}
			d.pos = end
			return s, nil
		}
		if v, end, ok := scalarAt(d.data, d.pos); ok {
			d.pos = end
			return v, nil
		}
		if err := d.start(); err != nil {
			d.err = err
			return nil, err
		}
	}
	for ; d.skip > 0; d.skip-- {
		if _, err := d.libValue(); err != nil {
			d.err = err
			return nil, err
		}
	}
	start := d.pos
	v, err := d.libValue()
	if err != nil {
		d.err = err
		return nil, err
	}
	return fixUnknownException(d.data, start, v), nil
}

// SetPool makes the decoder take what the library will allocate from p
// before it decodes (and fail if p has not that much left); Release gives
// it back.
func (d *Decoder) SetPool(p *Pool) { d.pool = p }

// Release gives back to the pool what decoding took from it. Call it once
// decoding is over; the decoder must not be used after.
func (d *Decoder) Release() {
	if d.pool != nil && d.held > 0 {
		d.pool.used.Add(-d.held)
		d.held = 0
	}
}

// start checks the rest of the body and puts the library at its start.
func (d *Decoder) start() error {
	v := &validator{data: d.data[d.pos:], left: d.budget, budget: d.budget}
	if d.pool != nil && len(v.data) > checkAlone {
		d.pool.checks <- struct{}{}
		defer func() { <-d.pool.checks }()
	}
	ends, err := v.run()
	if err != nil {
		return fmt.Errorf("%w (from offset %d of the body)", err, d.pos)
	}
	if d.pool != nil {
		need := d.budget - v.left
		if !d.pool.take(need) {
			return fmt.Errorf("%w: decoding this %d-byte body needs %d KiB and the %d MiB that the bodies decoded at once may use are taken; retry (on another provider), or raise the protocol's decode.memory",
				ErrBusy, d.size, need>>10, d.pool.max>>20)
		}
		d.held = need
	}
	d.checked, d.libStart, d.ends, d.next = true, d.pos, ends, 0
	return nil
}

// ErrBusy is the error of a body that the decoders' shared memory (Pool)
// has no room for at the moment: the body is fine, the process is busy.
var ErrBusy = errors.New("hessian2: the decoders' memory is in use")

// Pool is memory that the bodies decoded at once share: each takes what
// check says the library will allocate for it (its budget bounds one body;
// the pool bounds them all), so that many connections sending bodies just
// under their budget together cannot take more. Safe for concurrent use.
//
// It also bounds how many large bodies are checked at once (checks): the
// validator keeps a record of each list, map, object and class definition
// until it is done, up to about a tenth of the body's budget (a class
// definition is five wire bytes and a 24-byte record), and sixteen 8 MiB
// bodies checked at once would hold 160 MiB of them. Checking only uses a
// processor, so no more bodies than processors are checked at once; the
// others wait their turn, which costs them nothing they could have had.
type Pool struct {
	max    int64
	used   atomic.Int64
	checks chan struct{}
}

// checkAlone is the size over which a body waits for its turn (Pool) to
// be checked: smaller ones hold little, and most calls are small.
const checkAlone = 256 << 10

// NewPool returns a pool of limit bytes.
func NewPool(limit int64) *Pool {
	return &Pool{max: limit, checks: make(chan struct{}, max(2, runtime.GOMAXPROCS(0)))}
}

func (p *Pool) take(n int64) bool {
	for {
		u := p.used.Load()
		if u+n > p.max && u > 0 {
			// One body may always decode alone, however large its
			// budget allows it to be.
			return false
		}
		if p.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

// libValue has the library decode the next value, which check measured,
// and moves pos past it. A panic in the library fails this body, not the
// process: check keeps the library from the inputs known to make it panic,
// but it is not weft's code.
func (d *Decoder) libValue() (v any, err error) {
	if d.next >= len(d.ends) {
		d.pos = len(d.data)
		return nil, io.EOF
	}
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, fmt.Errorf("hessian2: at offset %d: the decoder failed on this body (%v)", d.pos, r)
		}
	}()
	if d.lib == nil {
		d.lib = hessian.NewDecoder(d.data[d.libStart:])
	}
	v, err = d.lib.Decode()
	if err != nil {
		return nil, fmt.Errorf("hessian2: at offset %d: %w", d.pos, err)
	}
	d.pos = d.libStart + d.ends[d.next]
	d.next++
	return v, nil
}

// passed records that a fast path read one value, ending at end: if the
// library is running, it reads past the value before its next one.
func (d *Decoder) passed(end int) {
	d.pos = end
	if d.checked {
		d.skip++
	}
}
