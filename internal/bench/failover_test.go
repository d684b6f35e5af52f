package bench

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
)

// TestFailoverAudit pins how duplicates and handoffs are counted: a
// mutating call belongs to its guest's newest action stored before it; a
// repeat that took effect is a duplicate, a refused one is not; a handoff
// is spurious unless its first executor was killed.
func TestFailoverAudit(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	w := newFailoverWatch(16)
	w.actions = map[string]*watchAction{
		"a1": {vmid: 101, at: at(0), results: []watchResult{{"executor@x", events.ResultStarted, at(1)}, {"executor@y", events.ResultSucceeded, at(9)}}},
		"a2": {vmid: 101, at: at(10), results: []watchResult{{"executor@y", events.ResultSucceeded, at(11)}}},
		"b1": {vmid: 102, at: at(0), results: []watchResult{{"executor@y", events.ResultStarted, at(1)}, {"executor@z", events.ResultSucceeded, at(9)}}},
	}
	for _, m := range []mutation{
		{"POST", "/api2/json/nodes/n1/qemu/101/status/start", 101, 200, at(0.5)},
		{"PUT", "/api2/json/nodes/n1/qemu/101/config", 101, 200, at(10.5)},
		{"PUT", "/api2/json/nodes/n1/qemu/101/config", 101, 500, at(10.7)}, // refused repeat
		{"POST", "/api2/json/nodes/n1/qemu/102/status/start", 102, 200, at(0.5)},
		{"POST", "/api2/json/nodes/n1/qemu/102/status/start", 102, 200, at(8)}, // duplicate
		{"POST", "/api2/json/nodes/n1/qemu/103/status/start", 103, 200, at(8)}, // no action
	} {
		w.onMutation(m)
	}
	c := w.audit(map[string]bool{"executor@x": true})
	want := auditCounts{duplicates: 1, refused: 1, handoffs: 2, spurious: 1, actions: 3, mutations: 6, orphan: 1}
	if c != want {
		t.Fatalf("audit = %+v, want %+v", c, want)
	}
}

// TestFailoverResumeProgress pins which actions a kill left unfinished:
// stored before it, in a partition the victim held, not final before it;
// each is done when a survivor journals a result after the kill.
func TestFailoverResumeProgress(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	w := newFailoverWatch(16)
	w.actions = map[string]*watchAction{
		"open":   {vmid: 101, partition: 3, at: at(0), results: []watchResult{{"executor@v", events.ResultStarted, at(1)}}},
		"done":   {vmid: 102, partition: 3, at: at(0), results: []watchResult{{"executor@v", events.ResultSucceeded, at(1)}}},
		"other":  {vmid: 103, partition: 4, at: at(0)},
		"later":  {vmid: 104, partition: 3, at: at(6)},
		"queued": {vmid: 105, partition: 3, at: at(1)},
	}
	k, done := w.resumeProgress("executor@v", map[int]bool{3: true}, at(2))
	if done || k.Open != 2 || k.Started != 1 {
		t.Fatalf("before survivors: %+v done %v, want 2 open, 1 started, not done", k, done)
	}
	w.actions["open"].results = append(w.actions["open"].results, watchResult{"executor@s", events.ResultSucceeded, at(10)})
	w.actions["queued"].results = append(w.actions["queued"].results, watchResult{"executor@s", events.ResultSucceeded, at(7)})
	k, done = w.resumeProgress("executor@v", map[int]bool{3: true}, at(2))
	if !done || k.Resume != 8*time.Second {
		t.Fatalf("after survivors: %+v done %v, want done, resume 8s", k, done)
	}
}

// TestRunFailoverTiny runs the failover profile at a tiny size: two
// executor processes (the converge binary, built here), two kills. It
// checks the run's shape and that no task was duplicated, never a time.
func TestRunFailoverTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("builds converge and runs executor processes")
	}
	bin := filepath.Join(t.TempDir(), "converge")
	build := exec.Command("go", "build", "-o", bin, "github.com/converge-pve/converge/cmd/converge")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building converge: %v\n%s", err, out)
	}
	o := DefaultFailoverOptions()
	o.ExecutorCommand = []string{bin, "executor"}
	o.Executors, o.Kills, o.Guests, o.Nodes, o.Rate = 2, 2, 40, 2, 6
	o.PowerTask, o.ConfigTask, o.LeaseTTL, o.AckWait, o.Settle = 300*time.Millisecond, 50*time.Millisecond, time.Second, 2*time.Second, 200*time.Millisecond
	o.Dir, o.Logger = t.TempDir(), zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	rep, det, err := RunFailover(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Kills != 2 || len(det.PerKill) != 2 {
		t.Fatalf("kills: report %d, details %d, want 2", rep.Kills, len(det.PerKill))
	}
	for i, k := range det.PerKill {
		if k.Held == 0 || k.Takeover <= 0 {
			t.Fatalf("kill %d: %+v: want partitions held and taken over", i+1, k)
		}
	}
	if rep.DuplicateTasks != 0 {
		t.Fatalf("%d duplicate tasks, want 0: %+v", rep.DuplicateTasks, rep)
	}
	if rep.Actions == 0 || rep.Mutations == 0 {
		t.Fatalf("no load: %+v", rep)
	}
}

func TestFailoverOptionsValidate(t *testing.T) {
	o := DefaultFailoverOptions()
	if err := o.Validate(); err == nil {
		t.Fatal("no ExecutorCommand: want an error")
	}
	o.ExecutorCommand = []string{"converge", "executor"}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	o.Executors = 1
	if err := o.Validate(); err == nil {
		t.Fatal("one executor: want an error")
	}
}
