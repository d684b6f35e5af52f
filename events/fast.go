package events

import (
	"bytes"
	"regexp"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
)

// The fast path of DecodeDesired. JSON Schema validation is the slowest
// part of folding the journal, and almost every desired event is valid. The
// fast path accepts a body only when it is certainly valid: it unmarshals
// it strictly into fastBody (exact field names, exact JSON types, no
// unknown member, and what checkStrict refuses refused too: a key given
// twice, invalid UTF-8, a lone surrogate, more than one value) and checks
// every constraint of desired.schema.json on those fields in Go. Anything
// else, valid or not, goes to checkStrict and the schema, which decide and
// explain. TestFastPathAgreesWithSchema checks that the fast path never
// accepts what the schema rejects.

var (
	nameRe    = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$`)
	tagRe     = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_+.-]*$`)
	nodeRe    = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?$`)
	storageRe = storageIDRe
	poolRe    = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)
)

// strictOptions are go-json-experiment's defaults (names matched exactly,
// duplicate names and invalid UTF-8 refused, one value only) and refuse
// unknown members: what the fast path reads is exactly what the schema
// reads.
var strictOptions = json.RejectUnknownMembers(true)

// fastBody holds the fields the fast path takes, each a pointer so that a
// member given is told from one left out; a member of any other field of
// Desired (node, disks, net, …) is unknown here, and the body goes to the
// schema. A field added to Desired is thus never accepted unchecked.
type fastBody struct {
	VMID        *int       `json:"vmid"`
	Kind        *GuestKind `json:"kind"`
	Power       *Power     `json:"power"`
	Cores       *int       `json:"cores"`
	MemoryMiB   *int       `json:"memory_mib"`
	Name        *string    `json:"name"`
	Description *string    `json:"description"`
	Tags        *[]string  `json:"tags"`
	OnBoot      *bool      `json:"onboot"`
	Absent      *bool      `json:"absent"`
	Restart     *Restart   `json:"restart"`
	Clone       *fastClone `json:"clone"`
}

type fastClone struct {
	From    *int    `json:"from"`
	Node    *string `json:"node"`
	Full    *bool   `json:"full"`
	Storage *string `json:"storage"`
	Pool    *string `json:"pool"`
}

func inRange(p *int, lo, hi int) bool { return p == nil || *p >= lo && *p <= hi }

// maxRunes is the schema's maxLength, which counts characters.
func maxRunes(p *string, n int) bool { return p == nil || utf8.RuneCountInString(*p) <= n }

func matches(re *regexp.Regexp, p *string) bool { return p == nil || re.MatchString(*p) }

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func oneOf[T ~string](p *T, a, b T) bool { return p == nil || *p == a || *p == b }

// fastDecode returns the decoded body and true only for bodies that are
// certainly valid against the schema.
func fastDecode(body []byte) (*Desired, bool) {
	// A null is never valid (no field of the schema admits one), but
	// unmarshals as a member left out: such bodies go to the schema. The
	// bytes "null" in a string send a valid body there too, rarely.
	if bytes.Contains(body, []byte("null")) {
		return nil, false
	}
	var b fastBody
	if json.Unmarshal(body, &b, strictOptions) != nil || b.VMID == nil || !b.valid() {
		return nil, false
	}
	d := &Desired{VMID: *b.VMID, Kind: b.Kind, Power: b.Power, Cores: b.Cores, MemoryMiB: b.MemoryMiB, Name: b.Name,
		Description: b.Description, Tags: b.Tags, OnBoot: b.OnBoot, Absent: b.Absent != nil && *b.Absent, Restart: b.Restart}
	if c := b.Clone; c != nil {
		d.Clone = &Clone{From: *c.From, Node: deref(c.Node), Full: c.Full, Storage: deref(c.Storage), Pool: deref(c.Pool)}
	}
	return d, true
}

// valid checks the schema's constraints on the fields read.
func (b *fastBody) valid() bool {
	ok := inRange(b.VMID, MinVMID, MaxVMID) && oneOf(b.Kind, QEMU, LXC) && oneOf(b.Power, PowerRunning, PowerStopped) &&
		inRange(b.Cores, 1, 8192) && inRange(b.MemoryMiB, 16, 268435456) &&
		maxRunes(b.Name, 255) && matches(nameRe, b.Name) && maxRunes(b.Description, 8192) &&
		oneOf(b.Restart, RestartNever, RestartAllowed)
	if !ok {
		return false
	}
	if b.Tags != nil {
		if len(*b.Tags) > 64 {
			return false
		}
		for _, t := range *b.Tags {
			if !maxRunes(&t, 128) || !tagRe.MatchString(t) {
				return false
			}
		}
	}
	c := b.Clone
	return c == nil || c.From != nil && inRange(c.From, MinVMID, MaxVMID) && matches(nodeRe, c.Node) &&
		matches(storageRe, c.Storage) && matches(poolRe, c.Pool) && maxRunes(c.Pool, 64)
}
