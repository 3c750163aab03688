package weft

import (
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// A small JSON decoder, enough for a filter's config, with the value types
// of encoding/json's decoding into any. The SDK does not use encoding/json:
// it pulls in fmt, os and reflect, which roughly double a filter's size and
// its list of WASI imports. A filter may still import encoding/json itself
// (with ConfigJSON, Call.Arguments, Call.Result).

const maxJSONDepth = 1000

type jsonParser struct {
	s     string
	i     int
	depth int
}

// parseJSON decodes one JSON value that must span all of s (surrounding
// white space allowed).
func parseJSON(s string) (any, error) {
	p := &jsonParser{s: s}
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i != len(p.s) {
		return nil, p.fail("unexpected data after the value")
	}
	return v, nil
}

func (p *jsonParser) fail(msg string) error {
	return errors.New("json: " + msg + " at offset " + strconv.Itoa(p.i))
}

func (p *jsonParser) space() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonParser) value() (any, error) {
	p.space()
	if p.i >= len(p.s) {
		return nil, p.fail("unexpected end of input")
	}
	switch c := p.s[p.i]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		return p.str()
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case p.literal("true"):
		return true, nil
	case p.literal("false"):
		return false, nil
	case p.literal("null"):
		return nil, nil
	}
	return nil, p.fail("invalid character " + strconv.QuoteRune(rune(p.s[p.i])))
}

func (p *jsonParser) literal(word string) bool {
	if len(p.s)-p.i >= len(word) && p.s[p.i:p.i+len(word)] == word {
		p.i += len(word)
		return true
	}
	return false
}

func (p *jsonParser) enter() error {
	p.depth++
	if p.depth > maxJSONDepth {
		return p.fail("nested too deeply")
	}
	return nil
}

func (p *jsonParser) object() (any, error) {
	m := map[string]any{}
	err := p.elements('}', func() error {
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return p.fail("expected a string key")
		}
		k, err := p.str()
		if err != nil {
			return err
		}
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return p.fail("expected ':'")
		}
		p.i++
		v, err := p.value()
		if err != nil {
			return err
		}
		m[k] = v
		return nil
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (p *jsonParser) array() (any, error) {
	a := []any{}
	err := p.elements(']', func() error {
		v, err := p.value()
		if err != nil {
			return err
		}
		a = append(a, v)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}

// elements reads an object or an array: the opening bracket at p.i, then
// the elements, each read by elem, separated by commas, up to the closing
// bracket end.
func (p *jsonParser) elements(end byte, elem func() error) error {
	if err := p.enter(); err != nil {
		return err
	}
	p.i++ // { or [
	p.space()
	if p.i < len(p.s) && p.s[p.i] == end {
		p.i++
		p.depth--
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		p.space()
		if p.i >= len(p.s) {
			return p.fail("unexpected end of input")
		}
		switch p.s[p.i] {
		case ',':
			p.i++
		case end:
			p.i++
			p.depth--
			return nil
		default:
			return p.fail("expected ',' or '" + string(end) + "'")
		}
	}
}

func (p *jsonParser) number() (any, error) {
	start := p.i
	digits := func() int {
		n := 0
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.s[p.i] == '-' {
		p.i++
	}
	if p.i < len(p.s) && p.s[p.i] == '0' {
		p.i++
	} else if digits() == 0 {
		return nil, p.fail("invalid number")
	}
	if p.i < len(p.s) && p.s[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return nil, p.fail("invalid number")
		}
	}
	if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		p.i++
		if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return nil, p.fail("invalid number")
		}
	}
	f, err := strconv.ParseFloat(p.s[start:p.i], 64)
	if err != nil {
		return nil, p.fail("number out of range")
	}
	return f, nil
}

func (p *jsonParser) str() (string, error) {
	p.i++ // opening quote
	start := p.i
	// Fast path: no escapes.
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c == '"' {
			s := p.s[start:p.i]
			p.i++
			if !utf8.ValidString(s) {
				return toValid(s), nil
			}
			return s, nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
		p.i++
	}
	b := []byte(p.s[start:p.i])
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return toValid(string(b)), nil
		case c < 0x20:
			return "", p.fail("control character in string")
		case c != '\\':
			b = append(b, c)
			p.i++
			continue
		}
		p.i++ // backslash
		if p.i >= len(p.s) {
			break
		}
		e := p.s[p.i]
		p.i++
		switch e {
		case '"', '\\', '/':
			b = append(b, e)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return "", p.fail("invalid \\u escape")
			}
			if utf16.IsSurrogate(r) {
				r2 := utf8.RuneError
				if p.i+1 < len(p.s) && p.s[p.i] == '\\' && p.s[p.i+1] == 'u' {
					save := p.i
					p.i += 2
					if lo, ok := p.hex4(); ok {
						r2 = utf16.DecodeRune(r, lo)
					}
					if r2 == utf8.RuneError {
						p.i = save // not a pair: decode the next escape alone
					}
				}
				r = r2
			}
			b = utf8.AppendRune(b, r)
		default:
			return "", p.fail("invalid escape")
		}
	}
	return "", p.fail("unterminated string")
}

func (p *jsonParser) hex4() (rune, bool) {
	if len(p.s)-p.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range []byte(p.s[p.i : p.i+4]) {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	p.i += 4
	return r, true
}

// toValid replaces invalid UTF-8 as encoding/json does.
func toValid(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	b := make([]byte, 0, len(s))
	for _, r := range s { // ranging yields RuneError for each bad byte
		b = utf8.AppendRune(b, r)
	}
	return string(b)
}
