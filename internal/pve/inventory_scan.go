package pve

import (
	"unicode/utf8"

	"github.com/converge-pve/converge/internal/pace"
)

// scanInventory reads an inventory answer of the usual shape in one pass
// over its bytes: {"data":[rows…]} where every row is an object of scalar
// members (strings without escapes, numbers, true, false, null), as
// Proxmox writes it. Each row fills a resourceRow as encoding/json would
// (a string member's null leaves it, the last of repeated members wins,
// other members are skipped) and is then read by appendRow, as
// decodeInventory does. ok is false for anything else (an escape, a
// nested value, a key that encoding/json would match without regard to
// case, invalid UTF-8, malformed JSON): decodeInventory then reads the
// answer as before. At 100,000 guests decodeInventory's streaming decoder
// was half a second of CPU every pass, in the latency path of every change
// that pass overlapped (issue 23); this is a fraction of it.
// FuzzInventoryScan holds the two equal wherever this one reads.
func scanInventory(body []byte, p *pace.Pacer) (out []Resource, ok bool) {
	s := scanner{b: body}
	if !s.byte('{') {
		return nil, false
	}
	seen := false
	for {
		key, ok := s.str()
		if !ok || !s.byte(':') {
			return nil, false
		}
		if string(key) != "data" {
			if !s.scalar() {
				return nil, false
			}
		} else {
			if seen || !s.byte('[') {
				return nil, false
			}
			seen = true
			out = []Resource{}
			if !s.byte(']') {
				for {
					p.Step()
					var row resourceRow
					if !s.row(&row) {
						return nil, false
					}
					if out, ok = appendRow(out, &row); !ok {
						return nil, false
					}
					if s.byte(']') {
						break
					}
					if !s.byte(',') {
						return nil, false
					}
				}
			}
		}
		if s.byte('}') {
			break
		}
		if !s.byte(',') {
			return nil, false
		}
	}
	s.ws()
	if s.i != len(s.b) || !seen {
		return nil, false
	}
	sortResources(out)
	return out, true
}

// scanner reads JSON strictly, declining (false) what it does not read
// exactly as encoding/json does.
type scanner struct {
	b []byte
	i int
}

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

// byte consumes c after white space, if it is next.
func (s *scanner) byte(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// str reads a string without escapes and returns its contents.
func (s *scanner) str() ([]byte, bool) {
	if !s.byte('"') {
		return nil, false
	}
	start := s.i
	ascii := true
	for ; s.i < len(s.b); s.i++ {
		c := s.b[s.i]
		switch {
		case c == '"':
			v := s.b[start:s.i]
			s.i++
			if !ascii && !utf8.Valid(v) {
				return nil, false // encoding/json substitutes U+FFFD
			}
			return v, true
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

// value reads a scalar and returns its bytes as written and its kind: '"'
// a string, '0' a number, 't', 'f' or 'n' a literal.
func (s *scanner) value() (raw []byte, kind byte, ok bool) {
	s.ws()
	if s.i >= len(s.b) {
		return nil, 0, false
	}
	start := s.i
	switch c := s.b[s.i]; {
	case c == '"':
		_, ok = s.str()
		return s.b[start:s.i], '"', ok
	case c == '-' || c >= '0' && c <= '9':
		ok = s.number()
		return s.b[start:s.i], '0', ok
	case c == 't', c == 'f', c == 'n':
		for _, lit := range [...]string{"true", "false", "null"} {
			if lit[0] == c && len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
				s.i += len(lit)
				return s.b[start:s.i], c, true
			}
		}
	}
	return nil, 0, false
}

func (s *scanner) scalar() bool {
	_, _, ok := s.value()
	return ok
}

// number reads a JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() bool {
	if s.b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(s.b) && s.b[s.i] == '0':
		s.i++
	case s.digits() == 0:
		return false
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			return false
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return false
		}
	}
	return true
}

func (s *scanner) digits() int {
	n := 0
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
		n++
	}
	return n
}

// row reads one row object into r.
func (s *scanner) row(r *resourceRow) bool {
	if !s.byte('{') {
		return false
	}
	if s.byte('}') {
		return true // {}: no guest, skipped as encoding/json's zero row is
	}
	for {
		key, ok := s.str()
		if !ok || !s.byte(':') {
			return false
		}
		v, kind, ok := s.value()
		if !ok || !r.set(key, v, kind) {
			return false
		}
		if s.byte('}') {
			return true
		}
		if !s.byte(',') {
			return false
		}
	}
}

// set stores one member (v as written) as encoding/json would into the
// typed row; false where that would fail or where the key could match a
// field regardless of case (encoding/json does, the scanner does not).
func (r *resourceRow) set(key, v []byte, kind byte) bool {
	var str *string
	var raw *[]byte
	switch string(key) {
	case "type":
		str = &r.Type
	case "node":
		str = &r.Node
	case "name":
		str = &r.Name
	case "status":
		str = &r.Status
	case "lock":
		str = &r.Lock
	case "tags":
		str = &r.Tags
	case "hastate":
		str = &r.HAState
	case "pool":
		str = &r.Pool
	case "vmid":
		raw = (*[]byte)(&r.VMID)
	case "template":
		raw = (*[]byte)(&r.Template)
	case "maxcpu":
		raw = (*[]byte)(&r.MaxCPU)
	case "maxmem":
		raw = (*[]byte)(&r.MaxMem)
	case "uptime":
		raw = (*[]byte)(&r.Uptime)
	default:
		return !foldsToRowField(key)
	}
	switch {
	case raw != nil:
		*raw = v // json.RawMessage: the value as written
	case kind == '"':
		*str = internString(v[1 : len(v)-1])
	case kind != 'n': // a number or boolean into a string fails
		return false
	}
	return true
}

// foldsToRowField reports a key that is not one of resourceRow's but that
// encoding/json might match to one without regard to case: any with a
// byte beyond ASCII (Unicode folding: "ſ" is "s", "K" is "k"), or one
// equal to a field's name in ASCII letters of another case.
func foldsToRowField(key []byte) bool {
	for _, c := range key {
		if c >= utf8.RuneSelf {
			return true
		}
	}
	for _, f := range [...]string{"type", "node", "name", "status", "lock", "tags", "hastate", "pool", "vmid", "template", "maxcpu", "maxmem", "uptime"} {
		if len(f) == len(key) && asciiFoldEqual(f, key) {
			return true
		}
	}
	return false
}

func asciiFoldEqual(f string, key []byte) bool {
	for i := range len(f) {
		c := key[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != f[i] {
			return false
		}
	}
	return true
}

// internString returns the usual values of a row's string members (the
// guest's type, status, a node of a small cluster) without allocating.
func internString(v []byte) string {
	switch string(v) {
	case "":
		return ""
	case "qemu":
		return "qemu"
	case "lxc":
		return "lxc"
	case "running":
		return "running"
	case "stopped":
		return "stopped"
	}
	return string(v)
}
