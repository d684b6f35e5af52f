package events_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/converge-pve/converge/events"
)

// A reason is one line of text of at most 1 KiB: anything else is refused
// before it is published (and ignored if folded).
func TestControlReason(t *testing.T) {
	ok := []string{"", "maintenance window CHG-1234", "ärger über den Knoten – ok", "no\u00a0break space", strings.Repeat("x", events.MaxControlReason)}
	for _, r := range ok {
		c := events.Control{Command: events.CommandApprove, VMIDs: []int{101}, Reason: r}
		if err := c.Validate(); err != nil {
			t.Errorf("reason %q refused: %v", r, err)
		}
	}
	for r, want := range map[string]string{
		strings.Repeat("x", events.MaxControlReason+1): "at most 1024 bytes",
		"bad \xff utf8":     "not valid UTF-8",
		"two\nlines":        "character U+000A at byte 3 is not text",
		"tab\there":         "character U+0009",
		"esc \x1b[31mred":   "character U+001B",
		"c1 \u0085 newline": "character U+0085",
		// Format characters and separators: found by review (accepted
		// before, and shown raw in the server's log and the answer).
		"rtl \u202e txet": "character U+202E",
		"isolate \u2066x": "character U+2066",
		"zero\u200bwidth": "character U+200B",
		"bom \ufeff":      "character U+FEFF",
		"line\u2028sep":   "character U+2028",
		"para\u2029sep":   "character U+2029",
	} {
		for _, cmd := range []string{events.CommandApprove, events.CommandResync} {
			c := events.Control{Command: cmd, All: true, Reason: r}
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), "reason: "+strings.SplitN(want, " ", 2)[0]) || !strings.Contains(err.Error(), want) {
				t.Errorf("%s with reason %q: got %v, want %q", cmd, r, err, want)
			}
		}
	}
	// Additive: journalled only when given, read back as written.
	b, err := json.Marshal(events.Control{Command: events.CommandPause, All: true})
	if err != nil || strings.Contains(string(b), "reason") {
		t.Fatalf("no reason: %s %v", b, err)
	}
	b, _ = json.Marshal(events.Control{Command: events.CommandPause, All: true, Reason: "disk swap"})
	c, err := events.Decode[events.Control](b)
	if err != nil || c.Reason != "disk swap" {
		t.Fatalf("decoded %+v %v from %s", c, err, b)
	}
}
