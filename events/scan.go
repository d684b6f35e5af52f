package events

import (
	"unicode/utf16"
	"unicode/utf8"
)

// scanner reads the JSON of converge's own event bodies for the typed
// decoders of fastevents.go. It accepts only what it reads exactly as
// encoding/json does into the same Go values; anything else (a null, a
// float or out-of-range number for an integer, a lone surrogate or
// invalid UTF-8, a field name that would match one case-insensitively,
// very deep nesting, invalid JSON) makes it give up, and Decode takes its
// general path, which decides and explains. Strings are copied out of
// the body: nothing decoded shares memory with it.
type scanner struct {
	b   []byte
	i   int
	bad bool
	// depth of skipped values (bounded: deeper is left to the general path)
	depth int
	buf   []byte // unescaping
}

func (s *scanner) fail() { s.bad, s.i = true, len(s.b) }

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next byte after whitespace, 0 at the end.
func (s *scanner) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *scanner) expect(c byte) bool {
	if s.peek() != c {
		s.fail()
		return false
	}
	s.i++
	return true
}

// end reports whether the body ended with the value just read (trailing
// whitespace only) and nothing went wrong.
func (s *scanner) end() bool {
	s.ws()
	return !s.bad && s.i == len(s.b)
}

// field starts the next member of a struct's object ('{' already read; n
// counts the members read) and returns its name, false at the object's
// end or on failure. A name that is not plain lower-case ASCII could
// match a field case-insensitively (encoding/json does): it fails.
func (s *scanner) field(n *int) ([]byte, bool) {
	if !s.more(n) {
		return nil, false
	}
	start := s.i + 1
	j := start
	for ; j < len(s.b) && s.b[j] != '"'; j++ {
		if c := s.b[j]; c < 0x20 || c >= 0x80 || c == '\\' || c >= 'A' && c <= 'Z' {
			s.fail()
			return nil, false
		}
	}
	if j == len(s.b) {
		s.fail()
		return nil, false
	}
	s.i = j + 1
	if !s.expect(':') {
		return nil, false
	}
	return s.b[start:j], true
}

// key starts the next member of a map's object and returns its key.
func (s *scanner) key(n *int) (string, bool) {
	if !s.more(n) {
		return "", false
	}
	k := s.str()
	if s.bad || !s.expect(':') {
		return "", false
	}
	return k, true
}

// more moves to the next member's name: false at '}' or on failure.
func (s *scanner) more(n *int) bool {
	if s.bad {
		return false
	}
	c := s.peek()
	if c == '}' {
		s.i++
		return false
	}
	if *n > 0 {
		if c != ',' {
			s.fail()
			return false
		}
		s.i++
		c = s.peek()
	}
	*n++
	if c != '"' {
		s.fail()
		return false
	}
	return true
}

// elem moves to an array's next element ('[' already read): false at ']'
// or on failure.
func (s *scanner) elem(n *int) bool {
	if s.bad {
		return false
	}
	c := s.peek()
	if c == ']' {
		s.i++
		return false
	}
	if *n > 0 {
		if c != ',' {
			s.fail()
			return false
		}
		s.i++
		s.ws()
	}
	*n++
	return true
}

// object reads '{'.
func (s *scanner) object() bool { return s.expect('{') }

// str reads a string into a new Go string.
func (s *scanner) str() string {
	raw, esc, ok := s.rawString()
	if !ok {
		return ""
	}
	if !esc {
		return string(raw)
	}
	return s.unescape(raw)
}

// rawString reads a string's bytes between its quotes; esc reports escapes
// in it. Invalid UTF-8 fails (encoding/json would replace it).
func (s *scanner) rawString() (raw []byte, esc, ok bool) {
	if s.peek() != '"' {
		s.fail()
		return nil, false, false
	}
	start := s.i + 1
	ascii := true
	j := start
	for ; j < len(s.b); j++ {
		c := s.b[j]
		if c == '"' {
			break
		}
		switch {
		case c == '\\':
			esc = true
			j++ // the escaped byte (checked by unescape)
		case c < 0x20:
			s.fail()
			return nil, false, false
		case c >= 0x80:
			ascii = false
		}
	}
	if j >= len(s.b) {
		s.fail()
		return nil, false, false
	}
	raw, s.i = s.b[start:j], j+1
	if !ascii && !utf8.Valid(raw) {
		s.fail()
		return nil, false, false
	}
	return raw, esc, true
}

func (s *scanner) unescape(raw []byte) string {
	out := s.buf[:0]
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		i++
		switch raw[i] {
		case '"', '\\', '/':
			out = append(out, raw[i])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(raw[i+1:])
			i += 4
			if ok && utf16.IsSurrogate(r) {
				// Only a valid pair: encoding/json replaces a lone half.
				var r2 rune
				if ok = i+6 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u'; ok {
					r2, ok = hex4(raw[i+3:])
				}
				if r = utf16.DecodeRune(r, r2); !ok || r == utf8.RuneError {
					s.fail()
					return ""
				}
				i += 6
			}
			if !ok {
				s.fail()
				return ""
			}
			out = utf8.AppendRune(out, r)
		default:
			s.fail()
			return ""
		}
	}
	s.buf = out
	return string(out)
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// symbols are the values that recur in every event (kinds, operations,
// statuses, classes, sources, power states, the default cluster): sym
// returns them without allocating.
var symbols = func() map[string]string {
	m := map[string]string{}
	for _, s := range []string{string(QEMU), string(LXC), string(PowerRunning), string(PowerStopped), "paused", "unknown",
		string(RestartNever), string(RestartAllowed), SourceObserver, SourceExecutor, DefaultCluster,
		string(OpStart), string(OpStop), string(OpShutdown), string(OpReboot), string(OpSetConfig), string(OpClone),
		string(OpRemoveHA), string(OpDestroy), string(OpHold), string(OpResize), string(OpMigrate), string(OpSetPool),
		string(OpSnapshot), string(OpSetHAState), string(ResultStarted), string(ResultSucceeded), string(ResultFailed),
		string(ResultSkipped), string(ClassUnknown), string(ClassTransient), string(ClassLocked), string(ClassAlreadyDone),
		string(ClassGone), string(ClassTerminal), string(ClassConflict), string(ClassUnauthorized)} {
		m[s] = s
	}
	return m
}()

// sym reads a string as str does, returning a recurring value's constant
// instead of a copy.
func (s *scanner) sym() string {
	raw, esc, ok := s.rawString()
	switch {
	case !ok:
		return ""
	case esc:
		return s.unescape(raw)
	}
	if v, ok := symbols[string(raw)]; ok {
		return v
	}
	return string(raw)
}
