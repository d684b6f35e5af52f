package planloop

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/internal/clock"
	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
	"github.com/converge-pve/converge/projector"
)

func rejectedDoc(vmid int, seq uint64) planner.Doc {
	return planner.Doc{View: &projector.View{VMID: vmid, Cluster: "pve",
		Rejected: &projector.Rejection{Seq: seq, Reason: "invalid desired event: cores: must be at least 1, got 0", Publisher: "billing"}}}
}

// TestRejectionsAreLoggedOnceAndRateLimited: a rejected desired event is
// logged with vmid, seq, publisher and reason once, however often its
// document is flushed; a flood is cut to the rate and counted.
func TestRejectionsAreLoggedOnceAndRateLimited(t *testing.T) {
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	w := views.NewWriter(nil, "pve", "p", planner.DefaultPolicy(), clock.Real, zerolog.Nop())
	r := newRejections(zerolog.New(&logs), reg, w)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

	r.note([]planner.Doc{rejectedDoc(101, 7)}, now)
	r.note([]planner.Doc{rejectedDoc(101, 7)}, now) // rewritten: not again
	var line map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(logs.Bytes()), &line); err != nil {
		t.Fatalf("want one log line, got %q: %v", logs.String(), err)
	}
	if line["vmid"] != 101.0 || line["seq"] != 7.0 || line["publisher"] != "billing" || !strings.Contains(line["reason"].(string), "cores") {
		t.Fatalf("log line %v", line)
	}
	// A new rejection of the same guest is logged; a valid event clears it.
	r.note([]planner.Doc{rejectedDoc(101, 8)}, now)
	r.note([]planner.Doc{{View: &projector.View{VMID: 101, Cluster: "pve"}}}, now)
	if n := strings.Count(logs.String(), "\n"); n != 2 {
		t.Fatalf("%d lines:\n%s", n, logs.String())
	}
	// A flood: 1,000 guests rejected at once log the burst, the rest count.
	logs.Reset()
	var docs []planner.Doc
	for id := range 1000 {
		docs = append(docs, rejectedDoc(1000+id, 100))
	}
	r.note(docs, now)
	if n := strings.Count(logs.String(), "\n"); n > rejectLogBurst {
		t.Fatalf("%d lines for a flood, want at most %d", n, rejectLogBurst)
	}
	r.note([]planner.Doc{rejectedDoc(5000, 101)}, now.Add(time.Minute))
	if !strings.Contains(logs.String(), `"not_logged_before":`) {
		t.Fatalf("the line after a flood does not count what was not logged:\n%s", logs.String())
	}
	if got := testutil.ToFloat64(r.total); got != 1003 {
		t.Fatalf("rejected counter %v, want 1003", got)
	}
}
