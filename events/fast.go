package events

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"unicode/utf8"
)

// The fast path of DecodeDesired. JSON Schema validation is the slowest
// part of folding the journal, and almost every desired event is valid. The
// fast path accepts a body only when it is certainly valid: exact field
// names, exact JSON types, and every constraint of desired.schema.json
// checked in Go. Anything else, valid or not, goes to the schema, which
// decides and explains. TestFastPathAgreesWithSchema checks that the fast
// path never accepts what the schema rejects.

var (
	nameRe    = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$`)
	tagRe     = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_+.-]*$`)
	nodeRe    = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?$`)
	storageRe = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.-]*$`)
	poolRe    = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)
	null      = []byte("null")
)

func inRange(n, lo, hi int) bool { return n >= lo && n <= hi }

// fastDecode returns the decoded body and true only for bodies that are
// certainly valid against the schema.
func fastDecode(body []byte) (*Desired, bool) {
	// null is never a valid value here, and Go would read it as "absent".
	if bytes.Contains(body, null) {
		return nil, false
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil {
		return nil, false
	}
	d := &Desired{}
	for k, raw := range fields {
		if !fastField(d, k, raw) {
			return nil, false
		}
	}
	if !inRange(d.VMID, MinVMID, MaxVMID) {
		return nil, false // also: vmid missing
	}
	return d, true
}

// strict decodes one value of exactly the JSON type of v: Go's decoder
// would also take 4.0 or "4" for nothing, but it refuses both into an int,
// and refuses numbers into strings and bools.
func strict(raw json.RawMessage, v any) bool {
	return json.Unmarshal(raw, v) == nil
}

// strictInt, strictString and strictBool read the scalars of the common
// bodies as strict does, without a whole decoder run per field (which was
// most of the cost of replaying desired events). raw is one value the
// body's decode already checked as JSON: an integer literal is what
// encoding/json takes into an int; a string without escapes, in valid
// UTF-8, is its own bytes; anything else is left to strict.
func strictInt(raw json.RawMessage, n *int) bool {
	v, err := strconv.Atoi(string(raw))
	if err != nil {
		return false
	}
	*n = v
	return true
}

func strictString(raw json.RawMessage, s *string) bool {
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' {
		if in := raw[1 : len(raw)-1]; bytes.IndexByte(in, '\\') < 0 && utf8.Valid(in) {
			*s = string(in)
			return true
		}
	}
	return strict(raw, s)
}

func strictBool(raw json.RawMessage, b *bool) bool {
	switch string(raw) {
	case "true":
		*b = true
	case "false":
		*b = false
	default:
		return false
	}
	return true
}

func fastField(d *Desired, k string, raw json.RawMessage) bool {
	switch k {
	case "vmid":
		return strictInt(raw, &d.VMID)
	case "kind":
		var s string
		if !strictString(raw, &s) || (s != string(QEMU) && s != string(LXC)) {
			return false
		}
		kind := GuestKind(s)
		d.Kind = &kind
	case "power":
		var s string
		if !strictString(raw, &s) || (s != string(PowerRunning) && s != string(PowerStopped)) {
			return false
		}
		p := Power(s)
		d.Power = &p
	case "cores":
		var n int
		if !strictInt(raw, &n) || !inRange(n, 1, 8192) {
			return false
		}
		d.Cores = &n
	case "memory_mib":
		var n int
		if !strictInt(raw, &n) || !inRange(n, 16, 268435456) {
			return false
		}
		d.MemoryMiB = &n
	case "name":
		var s string
		if !strictString(raw, &s) || utf8.RuneCountInString(s) > 255 || !nameRe.MatchString(s) {
			return false
		}
		d.Name = &s
	case "description":
		var s string
		if !strictString(raw, &s) || utf8.RuneCountInString(s) > 8192 {
			return false
		}
		d.Description = &s
	case "tags":
		var tags []string
		if !strict(raw, &tags) || len(tags) > 64 {
			return false
		}
		for _, t := range tags {
			if utf8.RuneCountInString(t) > 128 || !tagRe.MatchString(t) {
				return false
			}
		}
		if tags == nil {
			tags = []string{}
		}
		d.Tags = &tags
	case "onboot":
		var b bool
		if !strictBool(raw, &b) {
			return false
		}
		d.OnBoot = &b
	case "absent":
		return strictBool(raw, &d.Absent)
	case "restart":
		var s string
		if !strictString(raw, &s) || (s != string(RestartNever) && s != string(RestartAllowed)) {
			return false
		}
		r := Restart(s)
		d.Restart = &r
	case "clone":
		var cf map[string]json.RawMessage
		if json.Unmarshal(raw, &cf) != nil {
			return false
		}
		c := &Clone{}
		for ck, cr := range cf {
			switch ck {
			case "from":
				if !strictInt(cr, &c.From) {
					return false
				}
			case "node":
				if !strictString(cr, &c.Node) || !nodeRe.MatchString(c.Node) {
					return false
				}
			case "full":
				var b bool
				if !strictBool(cr, &b) {
					return false
				}
				c.Full = &b
			case "storage":
				if !strictString(cr, &c.Storage) || !storageRe.MatchString(c.Storage) {
					return false
				}
			case "pool":
				if !strictString(cr, &c.Pool) || !poolRe.MatchString(c.Pool) || len(c.Pool) > 64 {
					return false
				}
			default:
				return false
			}
		}
		if !inRange(c.From, MinVMID, MaxVMID) {
			return false // also: from missing
		}
		d.Clone = c
	default:
		return false
	}
	return true
}
