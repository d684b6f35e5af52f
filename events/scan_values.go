package events

import (
	"strconv"
	"time"
)

// Values of the scanner (scan.go): numbers, literals, times, arrays and
// maps of strings, and any value skipped.

// integer reads an integer literal (no fraction or exponent: encoding/json
// refuses those for integer fields) as its digits.
func (s *scanner) integer() []byte {
	s.ws()
	start, j := s.i, s.i
	if j < len(s.b) && s.b[j] == '-' {
		j++
	}
	d := j
	for j < len(s.b) && s.b[j] >= '0' && s.b[j] <= '9' {
		j++
	}
	if j == d || s.b[d] == '0' && j > d+1 || j < len(s.b) && !delim(s.b[j]) {
		s.fail()
		return nil
	}
	s.i = j
	return s.b[start:j]
}

// delim reports the bytes that may follow a number or a literal.
func delim(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', ',', '}', ']':
		return true
	}
	return false
}

func (s *scanner) int() int {
	n, err := strconv.ParseInt(string(s.integer()), 10, strconv.IntSize)
	if err != nil {
		s.fail()
	}
	return int(n)
}

func (s *scanner) int64() int64 {
	n, err := strconv.ParseInt(string(s.integer()), 10, 64)
	if err != nil {
		s.fail()
	}
	return n
}

func (s *scanner) uint64() uint64 {
	n, err := strconv.ParseUint(string(s.integer()), 10, 64)
	if err != nil {
		s.fail()
	}
	return n
}

func (s *scanner) bool() bool {
	s.ws()
	switch {
	case s.literal("true"):
		return true
	case s.literal("false"):
		return false
	}
	s.fail()
	return false
}

func (s *scanner) literal(lit string) bool {
	j := s.i + len(lit)
	if j <= len(s.b) && string(s.b[s.i:j]) == lit && (j == len(s.b) || delim(s.b[j])) {
		s.i = j
		return true
	}
	return false
}

// time reads a string as time.Time's UnmarshalJSON does.
func (s *scanner) time() time.Time {
	s.ws()
	start := s.i
	if _, esc, ok := s.rawString(); !ok || esc {
		s.fail()
		return time.Time{}
	}
	var t time.Time
	if t.UnmarshalJSON(s.b[start:s.i]) != nil {
		s.fail()
	}
	return t
}

// strings reads an array of strings; [] is an empty slice, null nil.
func (s *scanner) strings() []string {
	if s.null() || !s.expect('[') {
		return nil
	}
	out := []string{}
	for n := 0; s.elem(&n); {
		out = append(out, s.str())
	}
	return out
}

// stringMap reads an object of strings into m (made if nil), as
// encoding/json fills a map; null is nil.
func (s *scanner) stringMap(m map[string]string) map[string]string {
	if s.null() {
		return nil
	}
	if !s.object() {
		return m
	}
	if m == nil {
		m = map[string]string{}
	}
	for n := 0; ; {
		k, ok := s.key(&n)
		if !ok {
			return m
		}
		m[k] = s.str()
	}
}

// skip reads any JSON value and drops it (an unknown field).
func (s *scanner) skip() {
	switch c := s.peek(); {
	case c == '"':
		s.skipString()
	case c == '{' || c == '[':
		if s.depth++; s.depth > 32 {
			s.fail()
			return
		}
		s.i++
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		for n := 0; !s.bad; n++ {
			d := s.peek()
			if d == end {
				s.i++
				s.depth--
				return
			}
			if n > 0 {
				if d != ',' {
					s.fail()
					return
				}
				s.i++
			}
			if c == '{' {
				if s.peek() != '"' {
					s.fail()
					return
				}
				s.skipString()
				s.expect(':')
			}
			s.skip()
		}
	case c == 't' || c == 'f' || c == 'n':
		if !s.literal("true") && !s.literal("false") && !s.literal("null") {
			s.fail()
		}
	default:
		s.number()
	}
}

// skipString reads a string, its escapes checked.
func (s *scanner) skipString() {
	if raw, esc, ok := s.rawString(); ok && esc {
		s.unescape(raw)
	}
}

// null reads a null, if that comes next.
func (s *scanner) null() bool {
	s.ws()
	return s.literal("null")
}

// number reads any JSON number.
func (s *scanner) number() {
	j := s.i
	if j < len(s.b) && s.b[j] == '-' {
		j++
	}
	digits := func() bool {
		k := j
		for j < len(s.b) && s.b[j] >= '0' && s.b[j] <= '9' {
			j++
		}
		return j > k
	}
	d := j
	if !digits() || s.b[d] == '0' && j > d+1 {
		s.fail()
		return
	}
	if j < len(s.b) && s.b[j] == '.' {
		j++
		if !digits() {
			s.fail()
			return
		}
	}
	if j < len(s.b) && (s.b[j] == 'e' || s.b[j] == 'E') {
		j++
		if j < len(s.b) && (s.b[j] == '+' || s.b[j] == '-') {
			j++
		}
		if !digits() {
			s.fail()
			return
		}
	}
	if j < len(s.b) && !delim(s.b[j]) {
		s.fail()
		return
	}
	s.i = j
}
