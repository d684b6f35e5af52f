package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// Issue 35, point 10: replay --until past the journal's end says so,
// and says it replayed the whole journal; within the journal it does not.
func TestReplayUntilPastTheEnd(t *testing.T) {
	c := startCLIBus(t)
	c.desire(t, 101, "--cores", "2")
	last := c.desire(t, 102, "--cores", "2")

	out, code := c.cli(t, "replay", "--until", "100000")
	if code != 0 || !strings.Contains(out, "--until seq 100000 is past the journal's end (seq 2): replayed the whole journal") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	out, code = c.cli(t, "replay", "--until", "2099-01-01T00:00:00Z")
	if code != 0 || !strings.Contains(out, "is past the journal's end (seq 2)") {
		t.Fatalf("a time to come: exit %d:\n%s", code, out)
	}
	out, code = c.cli(t, "replay", "--until", "1")
	if code != 0 || strings.Contains(out, "past the journal's end") || !strings.Contains(out, "replayed up to seq 1") {
		t.Fatalf("within the journal: exit %d:\n%s", code, out)
	}
	out, code = c.cli(t, "replay", "--until", "100000", "-o", "json")
	var doc struct {
		AsOf replayAsOf `json:"as_of"`
	}
	if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil || !doc.AsOf.PastEnd || doc.AsOf.Seq != last {
		t.Fatalf("-o json: exit %d %v: %s", code, err, out)
	}
}
