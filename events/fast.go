package events

import (
	"regexp"
	"unicode/utf8"
)

// The fast path of DecodeDesired. JSON Schema validation is the slowest
// part of folding the journal, and almost every desired event is valid. The
// fast path accepts a body only when it is certainly valid: exact field
// names, exact JSON types, every constraint of desired.schema.json checked
// in Go, and what checkStrict refuses refused too (a key given twice,
// invalid UTF-8, a lone surrogate, more than one value: the scanner of
// scan.go gives up on them). It reads the body in one pass. Anything else,
// valid or not, goes to checkStrict and the schema, which decide and
// explain. TestFastPathAgreesWithSchema checks that the fast path never
// accepts what the schema rejects.

var (
	nameRe    = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$`)
	tagRe     = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_+.-]*$`)
	nodeRe    = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?$`)
	storageRe = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.-]*$`)
	poolRe    = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)
)

func inRange(n, lo, hi int) bool { return n >= lo && n <= hi }

// Desired fields the fast path reads, as bits of a set (a key seen twice
// is refused, as checkStrict refuses it).
var desiredFields = map[string]uint{"vmid": 1, "kind": 2, "power": 4, "cores": 8, "memory_mib": 16, "name": 32,
	"description": 64, "tags": 128, "onboot": 256, "absent": 512, "restart": 1024, "clone": 2048}

// fastDecode returns the decoded body and true only for bodies that are
// certainly valid against the schema.
func fastDecode(body []byte) (*Desired, bool) {
	s := scanner{b: body}
	if !s.object() {
		return nil, false
	}
	d := &Desired{}
	var seen uint
	for n := 0; ; {
		k, ok := s.field(&n)
		if !ok {
			break
		}
		bit := desiredFields[string(k)]
		if bit == 0 || seen&bit != 0 || s.null() || !fastField(&s, d, bit) {
			return nil, false
		}
		seen |= bit
	}
	if !s.end() || !inRange(d.VMID, MinVMID, MaxVMID) { // also: vmid missing
		return nil, false
	}
	return d, true
}

// enumValue reads a string that must be one of two values (returned as
// the constant, not a copy).
func enumValue(s *scanner, a, b string) (string, bool) {
	v := s.sym()
	return v, !s.bad && (v == a || v == b)
}

func fastField(s *scanner, d *Desired, bit uint) bool {
	switch bit {
	case 1:
		d.VMID = s.int()
	case 2:
		v, ok := enumValue(s, string(QEMU), string(LXC))
		if !ok {
			return false
		}
		kind := GuestKind(v)
		d.Kind = &kind
	case 4:
		v, ok := enumValue(s, string(PowerRunning), string(PowerStopped))
		if !ok {
			return false
		}
		p := Power(v)
		d.Power = &p
	case 8:
		n := s.int()
		if s.bad || !inRange(n, 1, 8192) {
			return false
		}
		d.Cores = &n
	case 16:
		n := s.int()
		if s.bad || !inRange(n, 16, 268435456) {
			return false
		}
		d.MemoryMiB = &n
	case 32:
		v := s.str()
		if s.bad || utf8.RuneCountInString(v) > 255 || !nameRe.MatchString(v) {
			return false
		}
		d.Name = &v
	case 64:
		v := s.str()
		if s.bad || utf8.RuneCountInString(v) > 8192 {
			return false
		}
		d.Description = &v
	case 128:
		tags := s.strings()
		if s.bad || len(tags) > 64 {
			return false
		}
		for _, t := range tags {
			if utf8.RuneCountInString(t) > 128 || !tagRe.MatchString(t) {
				return false
			}
		}
		d.Tags = &tags
	case 256:
		b := s.bool()
		d.OnBoot = &b
	case 512:
		d.Absent = s.bool()
	case 1024:
		v, ok := enumValue(s, string(RestartNever), string(RestartAllowed))
		if !ok {
			return false
		}
		r := Restart(v)
		d.Restart = &r
	case 2048:
		c := fastClone(s)
		if c == nil {
			return false
		}
		d.Clone = c
	}
	return !s.bad
}

// Clone fields, as bits.
var cloneFields = map[string]uint{"from": 1, "node": 2, "full": 4, "storage": 8, "pool": 16}

func fastClone(s *scanner) *Clone {
	if !s.object() {
		return nil
	}
	c := &Clone{}
	var seen uint
	for n := 0; ; {
		k, ok := s.field(&n)
		if !ok {
			break
		}
		bit := cloneFields[string(k)]
		if bit == 0 || seen&bit != 0 || s.null() {
			return nil
		}
		seen |= bit
		switch bit {
		case 1:
			c.From = s.int()
		case 2:
			if c.Node = s.str(); !nodeRe.MatchString(c.Node) {
				return nil
			}
		case 4:
			b := s.bool()
			c.Full = &b
		case 8:
			if c.Storage = s.str(); !storageRe.MatchString(c.Storage) {
				return nil
			}
		case 16:
			if c.Pool = s.str(); !poolRe.MatchString(c.Pool) || len(c.Pool) > 64 {
				return nil
			}
		}
	}
	if s.bad || !inRange(c.From, MinVMID, MaxVMID) { // also: from missing
		return nil
	}
	return c
}
