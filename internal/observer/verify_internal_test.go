package observer

import (
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/internal/clock/clocktest"
)

// TestResyncAllowed: Run wakes for a resync only when it would be carried
// out; requests within ResyncInterval of the last resync wait, merged, for
// a later pass (TestResyncMergedAndSpread shows that pass).
func TestResyncAllowed(t *testing.T) {
	clk := clocktest.New(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	cfg := DefaultConfig()
	cfg.Name, cfg.Clock, cfg.Logger = "observer@test", clk, zerolog.Nop()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	o := &Observer{cfg: cfg, log: zerolog.Nop(), guests: map[int]*guestState{100: {}}, metrics: newMetrics(nil)}
	if !o.resyncAllowed() {
		t.Fatal("the first resync must be carried out at once")
	}
	o.Resync()
	var st PassStats
	o.takeResync(&st, clk.Now())
	if !st.Resync || o.resyncs.Load() != 0 {
		t.Fatalf("resync not carried out: %+v", st)
	}
	for range 10 {
		o.Resync()
	}
	clk.Advance(cfg.ResyncInterval - time.Second)
	st = PassStats{}
	if o.takeResync(&st, clk.Now()); o.resyncAllowed() || st.Resync || o.resyncs.Load() != 10 {
		t.Fatalf("within the interval: allowed=%v %+v, %d waiting", o.resyncAllowed(), st, o.resyncs.Load())
	}
	clk.Advance(time.Second)
	st = PassStats{}
	if o.takeResync(&st, clk.Now()); !st.Resync || st.ResyncsMerged != 9 || o.resyncs.Load() != 0 {
		t.Fatalf("after the interval: %+v, %d waiting", st, o.resyncs.Load())
	}
}
