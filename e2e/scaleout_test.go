package e2e

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/lease"
	"github.com/converge-pve/converge/internal/natsserver"
	"github.com/converge-pve/converge/internal/pvesim"
)

// scaleEnv is an embedded NATS server and an in-process simulator whose
// tasks run until the test completes them, with role processes around it.
type scaleEnv struct {
	natsURL string
	sim     *pvesim.Sim
	pveArgs []string
	js      jetstream.JetStream
	guests  []int
}

func newScaleEnv(t *testing.T, guests int) *scaleEnv {
	srv, err := natsserver.Start(natsserver.Options{DataDir: t.TempDir(), Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	// Tasks run until the test lets them finish: kills are mid-task by
	// construction, not by timing.
	sim, err := pvesim.New(pvesim.Options{Guests: guests, Tokens: map[string]string{"root@pam!scale": "scale-secret"},
		Faults: pvesim.Faults{TaskLatency: pvesim.Duration(time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	e := &scaleEnv{natsURL: srv.ClientURL(), sim: sim, js: js,
		pveArgs: []string{"--pve-url", sim.URL(), "--pve-token-id", "root@pam!scale", "--pve-token-secret", "scale-secret"}}
	for _, g := range sim.Guests() {
		if !g.Template {
			e.guests = append(e.guests, g.VMID)
		}
	}
	sort.Ints(e.guests)
	return e
}

// executor starts an executor process with the default lease TTL and
// AckWait, so that the failover the test logs is the one users get.
func (e *scaleEnv) executor(t *testing.T, name string, extra ...string) *proc {
	args := append([]string{"executor", "--nats", e.natsURL, "--name", name}, e.pveArgs...)
	return startProc(t, name, append(args, extra...)...)
}

// flipPower asks every guest to be in the power state it is not in.
func (e *scaleEnv) flipPower(t *testing.T, ctx context.Context) {
	t.Helper()
	for _, g := range e.sim.Guests() {
		if g.Template {
			continue
		}
		want := "running"
		if g.Status == "running" {
			want = "stopped"
		}
		body := `{"vmid":` + strconv.Itoa(g.VMID) + `,"power":"` + want + `"}`
		if _, err := e.js.Publish(ctx, events.Subject(events.KindDesired, "pve", g.VMID), []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
}

func (e *scaleEnv) wait(t *testing.T) {
	t.Helper()
	args := []string{"wait", "--nats", e.natsURL, "--timeout", "120s"}
	for _, id := range e.guests {
		args = append(args, strconv.Itoa(id))
	}
	if out, code := runCLI(t, args...); code != 0 {
		t.Fatalf("converge wait exited %d: %s", code, tail(out, 2000))
	}
}

// leaseOwners returns the member holding each partition of a group.
func (e *scaleEnv) leaseOwners(t *testing.T, group string) map[int]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := e.js.KeyValue(ctx, lease.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]string{}
	for p := range 16 {
		if en, err := kv.Get(ctx, group+".p."+strconv.Itoa(p)); err == nil {
			out[p] = string(en.Value())
		}
	}
	return out
}

// shares counts partitions per executor name (the member id minus its
// random suffix).
func shares(owners map[int]string) map[string]int {
	n := map[string]int{}
	for _, m := range owners {
		n[m[:strings.LastIndexByte(m, '-')]]++
	}
	return n
}

// checkOneTaskPerMutation: every Proxmox power task belongs to exactly one
// journalled action, and no action's mutation was issued twice.
func checkOneTaskPerMutation(t *testing.T, e *scaleEnv) {
	t.Helper()
	upids := map[string]string{} // UPID -> action
	for _, en := range readJournal(t, e.js) {
		if en.info.Kind != events.KindResult {
			continue
		}
		r, _ := events.Decode[events.Result](en.data)
		if r.UPID == "" {
			continue
		}
		if a, ok := upids[r.UPID]; ok && a != r.ActionID {
			t.Fatalf("task %s journalled for actions %s and %s", r.UPID, a, r.ActionID)
		}
		upids[r.UPID] = r.ActionID
	}
	byAction := map[string]int{}
	for _, task := range e.sim.Tasks() {
		if !strings.HasSuffix(task.Type, "start") && !strings.HasSuffix(task.Type, "shutdown") && !strings.HasSuffix(task.Type, "stop") {
			continue
		}
		a, ok := upids[task.UPID]
		if !ok {
			t.Fatalf("Proxmox task %s (%s on %s) is in no journalled result: a mutation nobody journalled", task.UPID, task.Type, task.ID)
		}
		byAction[a]++
	}
	for a, n := range byAction {
		if n != 1 {
			t.Fatalf("action %s issued %d Proxmox tasks", a, n)
		}
	}
}

// TestExecutorsShareFailoverAndJoin: three executor processes share the 16
// partitions and all of them act; one is SIGKILLed while its tasks run: its
// partitions move to the survivors, its journalled tasks are resumed there
// rather than issued again, every guest converges and per-guest order holds
// (journal audit, one Proxmox task per action). A fourth executor then
// receives a share and acts on it.
func TestExecutorsShareFailoverAndJoin(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	e := newScaleEnv(t, 48)
	startProc(t, "observer", append([]string{"observer", "--nats", e.natsURL, "--observe-interval", "300ms"}, e.pveArgs...)...)
	// No per-node limit: every guest's task must be running when e2 dies;
	// half the fleet shutting down at once is what the guard would hold
	// (both have their own tests: internal/app/limits_test.go, e2e
	// TestSafetyCommands).
	startProc(t, "planner", "planner", "--nats", e.natsURL, "--observe-interval", "1s", "--node-concurrency", "-1", "--guard-share", "1")
	execs := map[string]*proc{}
	for _, n := range []string{"e1", "e2", "e3"} {
		execs[n] = e.executor(t, n)
	}
	eventually(t, 60*time.Second, "three executors sharing 16 partitions", func() bool {
		s := shares(e.leaseOwners(t, "executor-pve"))
		return len(s) == 3 && s["executor_e1"]+s["executor_e2"]+s["executor_e3"] == 16 &&
			s["executor_e1"] >= 5 && s["executor_e2"] >= 5 && s["executor_e3"] >= 5
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e.flipPower(t, ctx)

	// Every guest's task is running (they never finish on their own).
	started := map[string]events.Result{} // action -> started
	by := map[string]int{}
	eventually(t, 90*time.Second, "a started task journalled for every guest", func() bool {
		clear(started)
		clear(by)
		for _, en := range readJournal(t, e.js) {
			if en.info.Kind == events.KindResult {
				if r, _ := events.Decode[events.Result](en.data); r.Status == events.ResultStarted {
					started[r.ActionID] = r
					by[r.Executor]++
				}
			}
		}
		return len(started) == len(e.guests)
	})
	t.Logf("tasks started per executor: %v", by)
	for _, n := range []string{"e1", "e2", "e3"} {
		if by["executor@"+n] == 0 {
			t.Fatalf("executor %s got no actions: %v", n, by)
		}
	}

	execs["e2"].kill()
	killedAt := time.Now()
	if n := e.sim.CompleteRunningTasks(); n != len(e.guests) {
		t.Fatalf("%d tasks were running at the kill, want %d", n, len(e.guests))
	}
	e.wait(t)
	t.Logf("all %d guests converged %s after the kill", len(e.guests), time.Since(killedAt).Round(100*time.Millisecond))
	eventually(t, 30*time.Second, "e2's partitions taken over by e1 and e3", func() bool {
		s := shares(e.leaseOwners(t, "executor-pve"))
		return s["executor_e2"] == 0 && s["executor_e1"]+s["executor_e3"] == 16
	})

	// e2's actions were finished by the survivors, on e2's tasks.
	finals := map[string]events.Result{}
	for _, en := range readJournal(t, e.js) {
		if en.info.Kind == events.KindResult {
			if r, _ := events.Decode[events.Result](en.data); r.Status.Final() {
				finals[r.ActionID] = r
			}
		}
	}
	resumed := 0
	var lastResumed time.Time
	for id, s := range started {
		f, ok := finals[id]
		if !ok {
			t.Fatalf("action %s has no final result", id)
		}
		if f.UPID != s.UPID {
			t.Fatalf("action %s started task %s but finished on %q", id, s.UPID, f.UPID)
		}
		if s.Executor == "executor@e2" {
			if f.Executor == "executor@e2" {
				t.Fatalf("action %s finished by the killed executor", id)
			}
			resumed++
			if f.Time.After(lastResumed) {
				lastResumed = f.Time
			}
		}
	}
	// The figure docs/benchmarks.md quotes (default lease TTL and AckWait).
	t.Logf("%d of e2's in-flight actions resumed by the survivors; failover (SIGKILL to the last of them finished): %s",
		resumed, lastResumed.Sub(killedAt).Round(100*time.Millisecond))
	auditJournal(t, e.js)
	checkOneTaskPerMutation(t, e)

	// A fourth executor joins and gets a share.
	execs["e4"] = e.executor(t, "e4")
	eventually(t, 60*time.Second, "e4 holding a share", func() bool {
		s := shares(e.leaseOwners(t, "executor-pve"))
		return s["executor_e4"] >= 5 && s["executor_e1"]+s["executor_e3"]+s["executor_e4"] == 16
	})
	if err := e.sim.UpdateFaults(func(f *pvesim.Faults) { f.TaskLatency = 0 }); err != nil {
		t.Fatal(err)
	}
	e.flipPower(t, ctx)
	e.wait(t)
	by4 := 0
	for _, en := range readJournal(t, e.js) {
		if en.info.Kind == events.KindResult {
			if r, _ := events.Decode[events.Result](en.data); r.Status.Final() && r.Executor == "executor@e4" {
				by4++
			}
		}
	}
	if by4 == 0 {
		t.Fatal("e4 finished no action after joining")
	}
	t.Logf("e4 finished %d actions after joining", by4)
	auditJournal(t, e.js)
	checkOneTaskPerMutation(t, e)
}

// TestTwoPlannersFailover: two planner processes share the partitions; one
// is SIGKILLed between waves of changes. No action is planned twice (the
// journal audit: one action in flight per guest, one final result each,
// action ids unique) and none is lost (every guest converges).
func TestTwoPlannersFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	e := newScaleEnv(t, 32)
	if err := e.sim.UpdateFaults(func(f *pvesim.Faults) { f.TaskLatency = pvesim.Duration(50 * time.Millisecond) }); err != nil {
		t.Fatal(err)
	}
	startProc(t, "observer", append([]string{"observer", "--nats", e.natsURL, "--observe-interval", "300ms"}, e.pveArgs...)...)
	// Waves that shut down half the fleet: the guard's own test is
	// TestSafetyCommands.
	p1 := startProc(t, "planner1", "planner", "--nats", e.natsURL, "--name", "p1", "--observe-interval", "1s", "--lease-ttl", "2s", "--guard-share", "1")
	startProc(t, "planner2", "planner", "--nats", e.natsURL, "--name", "p2", "--observe-interval", "1s", "--lease-ttl", "2s", "--guard-share", "1")
	e.executor(t, "e1", "--lease-ttl", "2s", "--ack-wait", "3s")
	eventually(t, 60*time.Second, "two planners sharing the partitions", func() bool {
		s := shares(e.leaseOwners(t, "planner-pve"))
		return s["planner_p1"] == 8 && s["planner_p2"] == 8
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Wave 1: both plan.
	e.flipPower(t, ctx)
	e.wait(t)
	publishers := map[string]int{}
	for _, en := range readJournal(t, e.js) {
		if en.info.Kind == events.KindAction {
			a, _ := events.Decode[events.Action](en.data)
			publishers[a.Publisher]++
		}
	}
	if publishers["planner@p1"] == 0 || publishers["planner@p2"] == 0 {
		t.Fatalf("actions per planner: %v; want both planning", publishers)
	}
	// Wave 2, with p1 killed while it runs.
	e.flipPower(t, ctx)
	p1.kill()
	e.wait(t)
	eventually(t, 30*time.Second, "p2 holding every partition", func() bool {
		return shares(e.leaseOwners(t, "planner-pve"))["planner_p2"] == 16
	})
	// Wave 3: p2 alone.
	e.flipPower(t, ctx)
	e.wait(t)
	_, actions := auditJournal(t, e.js)
	t.Logf("%d actions over three waves; wave 1 per planner: %v", actions, publishers)
	checkOneTaskPerMutation(t, e)
}
