package views_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/clock/clocktest"
	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
	"github.com/converge-pve/converge/projector"
)

// hostileBody is a ~770 KB desired body with 70,000 unknown fields.
func hostileBody(i int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `{"vmid":101`)
	for f := range 70_000 {
		fmt.Fprintf(&b, `,"x%d_%05d":1`, i, f)
	}
	b.WriteString("}")
	return []byte(b.String())
}

func heapAfterGC() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestHostileDesiredEventsStayBounded: five ~770 KB desired events with
// 70,000 unknown fields each, folded by the planner engine and written by
// the views writer as the planner loop does for 10 s of ticks, leave the
// guest's document written once, its status rejected with a short reason,
// and memory flat. Before: a 4 MB reason per event, a document over the
// NATS payload limit rewritten at every flush, the guest never shown as
// rejected.
func TestHostileDesiredEventsStayBounded(t *testing.T) {
	bodies := make([][]byte, 5)
	for i := range bodies {
		bodies[i] = hostileBody(i)
	}
	if n := len(bodies[0]); n < 700_000 {
		t.Fatalf("body of %d bytes", n)
	}
	clk := clocktest.New(t0)
	cfg := planner.DefaultConfig()
	eng, err := planner.NewEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	st := newMemStore()
	w := views.NewWriter(st, "pve", "planner@test", eng.Config().Policy, clk, zerolog.Nop())
	w.Start()
	defer w.Close(30 * time.Second)

	base := heapAfterGC()
	subject := events.StoredSubject(events.KindDesired, "pve", 101, cfg.Partitions)
	eng.Begin(0, clk.Now())
	for i, b := range bodies {
		eng.Fold([]projector.Event{{Seq: uint64(i + 1), Subject: subject, Data: b, Time: clk.Now()}}, 0, clk.Now())
	}
	bodies = nil
	// The planner loop: ticks, flushes handed to the writer, failed
	// documents handed back.
	for range 40 {
		clk.Advance(250 * time.Millisecond)
		eng.Tick(clk.Now())
		for {
			r := eng.Ready()
			if r.Empty() {
				break
			}
			if r.Flush != nil && !w.Write(r.Flush) {
				for _, d := range r.Flush.Docs { // busy: kept for the next flush
					eng.Unwritten([]int{d.View.VMID})
				}
			}
			for w.Writing() > 0 { // wait for the writer's goroutine
				runtime.Gosched()
			}
		}
		for _, id := range drain(w) {
			eng.Unwritten([]int{id})
		}
	}
	grew := int64(heapAfterGC()) - int64(base)
	t.Logf("heap growth %d KB; %d writes of the document", grew>>10, st.count(views.GuestKey("pve", 101)))
	if grew > 30<<20 {
		t.Errorf("heap grew %d MB", grew>>20)
	}
	if n := st.count(views.GuestKey("pve", 101)); n != 1 {
		t.Errorf("%d writes of the guest's document, want 1", n)
	}
	b, _ := st.Get(context.Background(), views.GuestKey("pve", 101))
	var g views.GuestDoc
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatalf("document %.200q: %v", b, err)
	}
	if g.Status.Kind != planner.Rejected || g.View.Rejected == nil || g.View.Rejected.Seq != 5 {
		t.Fatalf("status %+v, rejection %+v", g.Status, g.View.Rejected)
	}
	if len(g.View.Rejected.Reason) > events.MaxReasonBytes || len(b) > 8<<10 {
		t.Fatalf("reason of %d bytes in a document of %d", len(g.View.Rejected.Reason), len(b))
	}
}
