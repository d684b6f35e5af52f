package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/bench"
)

// A small clones run: every clone made once, none failed nor timed out on
// its storage's lock, and the report consistent with itself. No figure is
// asserted against a speed.
func TestRunClonesSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole pipeline")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	o := bench.DefaultClonesOptions()
	o.Guests, o.APILatency, o.QEMUClone, o.LXCClone = 16, time.Millisecond, 50*time.Millisecond, 50*time.Millisecond
	o.ConfigWrite, o.LockHold, o.Dir = 10*time.Millisecond, 10*time.Millisecond, t.TempDir()
	rep, err := bench.RunClones(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Guests != 16 || rep.QEMU+rep.LXC != 16 || rep.Full+rep.Linked != 16 || len(rep.Storages) == 0 || !rep.LockModelled {
		t.Fatalf("report %+v", rep)
	}
	if rep.CloneTasks != 16 || rep.FailedTasks != 0 || rep.LockTimeouts != 0 {
		t.Errorf("%d clone tasks, %d failed, %d lock timeouts; want 16, 0, 0", rep.CloneTasks, rep.FailedTasks, rep.LockTimeouts)
	}
	if rep.MakespanS <= 0 || rep.IdealMakespanS <= 0 || rep.MakespanRatio != rep.MakespanS/rep.IdealMakespanS || rep.IdealBound == "" {
		t.Errorf("makespan %v, ideal %v (%s), ratio %v", rep.MakespanS, rep.IdealMakespanS, rep.IdealBound, rep.MakespanRatio)
	}
	// VM clones up to the limit per storage, and one clone per container
	// template (two templates) besides.
	if rep.CloneConcurrency > 0 && rep.MaxClonesPerStorage > rep.CloneConcurrency+2 {
		t.Errorf("%d clones at once on a storage, the limit is %d VM clones and one per container template", rep.MaxClonesPerStorage, rep.CloneConcurrency)
	}
}
