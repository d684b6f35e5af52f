package views

import (
	"bytes"
	"strconv"
	"unicode/utf8"

	json "github.com/go-json-experiment/json/v1"

	"github.com/converge-pve/converge/planner"
	"github.com/converge-pve/converge/projector"
)

// MaxDocBytes bounds a document as written, well below NATS's default
// 1 MiB message limit: a document over it (long strings from hostile
// events) has its long strings cut, and if that is not enough it is
// replaced by a minimal one; either is marked Truncated. A typical
// document is a few KB; a valid one with every string at its limit about
// 150 KB.
const MaxDocBytes = 256 << 10

// maxStringBytes is how much of each long string a cut document keeps.
const maxStringBytes = 1 << 10

// encodeBounded marshals v (a GuestDoc or ClusterDoc) within MaxDocBytes.
// minimal builds the document written when cutting strings is not enough.
func encodeBounded(v any, minimal func() any) ([]byte, bool, error) {
	b, err := json.Marshal(v)
	if err != nil || len(b) <= MaxDocBytes {
		return b, false, err
	}
	if c, err := cutStrings(b); err == nil && len(c) <= MaxDocBytes {
		return c, true, nil
	}
	b, err = json.Marshal(minimal())
	return b, true, err
}

// cutStrings re-encodes a JSON document with every string longer than
// maxStringBytes cut (at a rune boundary, saying how much was cut), and
// the document marked truncated.
func cutStrings(b []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // sequences stay exact
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	doc = cutValue(doc)
	if m, ok := doc.(map[string]any); ok {
		m["truncated"] = true
	}
	return json.Marshal(doc)
}

func cutValue(v any) any {
	switch x := v.(type) {
	case string:
		return cutString(x)
	case map[string]any:
		for k, e := range x {
			x[k] = cutValue(e)
		}
	case []any:
		for i, e := range x {
			x[i] = cutValue(e)
		}
	}
	return v
}

func cutString(s string) string {
	if len(s) <= maxStringBytes {
		return s
	}
	cut := maxStringBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "… (" + strconv.Itoa(len(s)-cut) + " bytes cut)"
}

// minimalGuest is what is left of a guest's document that cutting strings
// could not bound: the guest, its state and the sequences it reflects.
func minimalGuest(d GuestDoc) any {
	v := d.View
	m := &projector.View{VMID: v.VMID, Cluster: v.Cluster, Seq: v.Seq, DesiredSeq: v.DesiredSeq,
		ObservedSeq: v.ObservedSeq, LastActionSeq: v.LastActionSeq, LastResultSeq: v.LastResultSeq}
	if v.Rejected != nil {
		r := *v.Rejected
		r.Reason, r.Publisher = cutString(r.Reason), cutString(r.Publisher)
		m.Rejected = &r
	}
	return GuestDoc{View: m, Status: planner.Status{Kind: d.Status.Kind, Reason: cutString(d.Status.Reason)},
		UpdatedAt: d.UpdatedAt, Truncated: true}
}
