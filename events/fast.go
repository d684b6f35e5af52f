package events

import (
	"bytes"
	"encoding/json"
	"regexp"
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

func fastField(d *Desired, k string, raw json.RawMessage) bool {
	switch k {
	case "vmid":
		return strict(raw, &d.VMID)
	case "kind":
		var s string
		if !strict(raw, &s) || (s != string(QEMU) && s != string(LXC)) {
			return false
		}
		kind := GuestKind(s)
		d.Kind = &kind
	case "power":
		var s string
		if !strict(raw, &s) || (s != string(PowerRunning) && s != string(PowerStopped)) {
			return false
		}
		p := Power(s)
		d.Power = &p
	case "cores":
		var n int
		if !strict(raw, &n) || !inRange(n, 1, 8192) {
			return false
		}
		d.Cores = &n
	case "memory_mib":
		var n int
		if !strict(raw, &n) || !inRange(n, 16, 268435456) {
			return false
		}
		d.MemoryMiB = &n
	case "name":
		var s string
		if !strict(raw, &s) || utf8.RuneCountInString(s) > 255 || !nameRe.MatchString(s) {
			return false
		}
		d.Name = &s
	case "description":
		var s string
		if !strict(raw, &s) || utf8.RuneCountInString(s) > 8192 {
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
		if !strict(raw, &b) {
			return false
		}
		d.OnBoot = &b
	case "absent":
		return strict(raw, &d.Absent)
	case "clone":
		var cf map[string]json.RawMessage
		if json.Unmarshal(raw, &cf) != nil {
			return false
		}
		c := &Clone{}
		for ck, cr := range cf {
			switch ck {
			case "from":
				if !strict(cr, &c.From) {
					return false
				}
			case "node":
				if !strict(cr, &c.Node) || !nodeRe.MatchString(c.Node) {
					return false
				}
			case "full":
				var b bool
				if !strict(cr, &b) {
					return false
				}
				c.Full = &b
			case "storage":
				if !strict(cr, &c.Storage) || !storageRe.MatchString(c.Storage) {
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
