package executor_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/executor"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/bus/bustest"
	"github.com/converge-pve/converge/internal/natsserver"
	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/pvesim"
)

// TestResumeJournalledTask: an action whose "started" result is in the
// journal (its executor died while waiting) is resumed by waiting on the
// journalled task; the mutation is not issued again (invariant 3).
func TestResumeJournalledTask(t *testing.T) {
	v := newEnv(t)
	v.addGuest(pvesim.GuestSpec{VMID: 101})
	v.faults(func(f *pvesim.Faults) { f.TaskLatency = pvesim.Duration(200 * time.Millisecond) })

	// The dead executor's work: the action, its task, the journalled UPID.
	a := action(101, events.OpStart)
	v.publishAction(a)
	tr, err := v.px.Start(tctx(t), qemu(101))
	if err != nil {
		t.Fatal(err)
	}
	v.publish(events.KindResult, 101, events.Result{
		Meta: events.NewMeta("dead-executor", a.CorrelationID, time.Now()), ActionID: a.ID, VMID: 101,
		Cluster: cluster, Op: a.Op, Status: events.ResultStarted, UPID: tr.UPID, Node: tr.Node, Executor: "dead-executor",
	}, nil)

	v.run(config(), nil)
	r := v.waitResult(101, a.ID, "final")
	if r.Status != events.ResultSucceeded || r.UPID != tr.UPID || r.Reason != "" || r.Observed == nil || r.Observed.Status != "running" {
		t.Fatalf("resumed result: %+v", r.Result)
	}
	if rs := of(v.results(101), a.ID); len(rs) != 2 {
		t.Fatalf("want the dead executor's started + one final, got %+v", rs)
	}
	if n := len(v.tasks(101, "qmstart")); n != 1 {
		t.Fatalf("%d start tasks, want 1: the mutation was issued again", n)
	}
}

// TestAlreadyFinishedAcknowledged: an action whose final result is in the
// journal (its executor died before acknowledging) is only acknowledged.
func TestAlreadyFinishedAcknowledged(t *testing.T) {
	v := newEnv(t)
	v.addGuest(pvesim.GuestSpec{VMID: 101})
	a := action(101, events.OpStart)
	seq := v.publishAction(a)
	v.publish(events.KindResult, 101, events.Result{
		Meta: events.NewMeta("dead-executor", a.CorrelationID, time.Now()), ActionID: a.ID, VMID: 101,
		Cluster: cluster, Op: a.Op, Status: events.ResultSucceeded, Executor: "dead-executor",
	}, nil)
	v.run(config(), nil)
	eventually(t, "the action acknowledged", func() bool {
		info := v.consumerInfo()
		return info.NumAckPending == 0 && info.NumPending == 0 && info.AckFloor.Stream >= seq
	})
	if rs := v.results(101); len(rs) != 1 {
		t.Fatalf("results: %+v", rs)
	}
	if tasks := v.sim.Tasks(); len(tasks) != 0 {
		t.Fatalf("Proxmox was mutated: %+v", tasks)
	}
}

// issueThenHang issues Start or Reboot and then hangs until its context
// ends, like an executor dying between Proxmox accepting a mutation and
// the journal.
type issueThenHang struct {
	executor.Proxmox
	issued chan pve.TaskRef
}

func (p issueThenHang) Start(ctx context.Context, ref pve.GuestRef) (pve.TaskRef, error) {
	return p.hang(ctx)(p.Proxmox.Start(ctx, ref))
}

func (p issueThenHang) Reboot(ctx context.Context, ref pve.GuestRef, timeout time.Duration) (pve.TaskRef, error) {
	return p.hang(ctx)(p.Proxmox.Reboot(ctx, ref, timeout))
}

func (p issueThenHang) hang(ctx context.Context) func(pve.TaskRef, error) (pve.TaskRef, error) {
	return func(tr pve.TaskRef, err error) (pve.TaskRef, error) {
		if err != nil {
			return tr, err
		}
		p.issued <- tr
		<-ctx.Done()
		return pve.TaskRef{}, ctx.Err()
	}
}

// dieAfterIssuing runs an executor over v.px that dies (is stopped,
// abandoning the action) right after Proxmox accepted a's mutation, and
// returns the task it issued.
func dieAfterIssuing(t *testing.T, v *env, cfg executor.Config, a events.Action) pve.TaskRef {
	t.Helper()
	hang := issueThenHang{Proxmox: v.px, issued: make(chan pve.TaskRef, 1)}
	first := v.run(cfg, hang)
	v.publishAction(a)
	var tr pve.TaskRef
	select {
	case tr = <-hang.issued:
	case <-tctx(t).Done():
		t.Fatalf("%s never issued", a.Op)
	}
	if err := first.stop(); err != nil { // abandons the action
		t.Fatal(err)
	}
	return tr
}

// noFinder hides *pve.Client's FindTask (an interface field carries only
// executor.Proxmox's methods): an executor without a TaskFinder.
type noFinder struct{ executor.Proxmox }

// TestUnjournalledTask: an executor dies after Proxmox accepted a start but
// before its task was journalled. The redelivery adopts the very task
// through *pve.Client's TaskFinder (a task list read of the simulator);
// without a finder, the pre-check finds the guest already running. Either
// way there is one start task and one final result.
func TestUnjournalledTask(t *testing.T) {
	for _, withFinder := range []bool{true, false} {
		name := "finder"
		if !withFinder {
			name = "precheck"
		}
		t.Run(name, func(t *testing.T) {
			v := newEnv(t)
			v.addGuest(pvesim.GuestSpec{VMID: 101})
			if withFinder {
				// The task outlives the dead executor: it is still running
				// when the successor looks for it. (Without a finder the
				// pre-check needs it done: a guest still starting reads as
				// stopped.)
				v.faults(func(f *pvesim.Faults) { f.TaskLatency = pvesim.Duration(time.Second) })
			}
			cfg := config(func(c *executor.Config) { c.AckWait = 300 * time.Millisecond })
			a := action(101, events.OpStart)
			tr := dieAfterIssuing(t, v, cfg, a)
			if rs := v.results(101); len(rs) != 0 {
				t.Fatalf("a dying executor journalled %+v", rs)
			}

			var px executor.Proxmox = v.px // *pve.Client: a TaskFinder
			if !withFinder {
				px = noFinder{v.px}
			}
			v.run(cfg, px)
			r := v.waitResult(101, a.ID, "final")
			rs := of(v.results(101), a.ID)
			if withFinder {
				checkJournalled(t, rs, events.ResultSucceeded)
				if rs[0].UPID != tr.UPID || r.UPID != tr.UPID {
					t.Fatalf("journalled %q and finished %q, want the issued task %q", rs[0].UPID, r.UPID, tr.UPID)
				}
			} else if r.Status != events.ResultSucceeded || r.Reason != "already running" || len(rs) != 1 {
				t.Fatalf("results: %+v", rs)
			}
			if n := len(v.tasks(101, "qmstart")); n != 1 {
				t.Fatalf("%d start tasks, want 1", n)
			}
		})
	}
}

// Crash test: a real executor process is killed with SIGKILL while it waits
// on a journalled task; a second executor resumes the action.

const helperEnv = "CONVERGE_EXECUTOR_TEST_HELPER"

// TestHelperProcess is the executor process of TestCrashKill; it does
// nothing in a normal test run.
func TestHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("helper process for TestCrashKill")
	}
	ctx := context.Background()
	log := zerolog.New(os.Stderr).With().Timestamp().Str("process", "child").Logger()
	bc := bus.DefaultConfig()
	bc.URLs, bc.Name, bc.Logger = os.Getenv("CONVERGE_NATS_URL"), "crash-child", log
	b, err := bus.Connect(ctx, bc)
	if err != nil {
		t.Fatal(err)
	}
	pc := pve.DefaultConfig()
	pc.URL, pc.TokenID, pc.TokenSecret = os.Getenv("PVE_URL"), simToken, simSecret
	px, err := pve.New(pc)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := executor.New(executor.Unverified(config(func(c *executor.Config) {
		c.Name, c.AckWait, c.DrainTimeout, c.Logger = "child", time.Second, executor.DefaultDrainTimeout, log
	})), px, b, b.LeaseStore)
	if err != nil {
		t.Fatal(err)
	}
	t.Fatal(ex.Run(ctx)) // runs until killed
}

func TestCrashKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	s, err := natsserver.Start(natsserver.Options{DataDir: t.TempDir(), Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	b := bustest.Connect(t, s)

	// Task status polls are held until the child is dead, so the child can
	// journal "started" but never see the task end, whatever the timing.
	gate := make(chan struct{})
	var openGate sync.Once
	t.Cleanup(func() { openGate.Do(func() { close(gate) }) })
	v := newEnvBehind(t, b, func(sim *pvesim.Sim) *httptest.Server {
		h := sim.Handler()
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.Contains(r.URL.Path, "/tasks/") && strings.HasSuffix(r.URL.Path, "/status") {
				select {
				case <-gate:
				case <-r.Context().Done():
					return
				}
			}
			h.ServeHTTP(w, r)
		}))
	})
	v.addGuest(pvesim.GuestSpec{VMID: 101})
	v.faults(func(f *pvesim.Faults) { f.TaskLatency = pvesim.Duration(300 * time.Millisecond) })

	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.v")
	cmd.Env = append(os.Environ(), helperEnv+"=1", "CONVERGE_NATS_URL="+s.ClientURL(), "PVE_URL="+v.url)
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("child output:\n%s", out.String())
		}
	})
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
		}
	})

	a := action(101, events.OpStart)
	v.publishAction(a)
	started := v.waitResult(101, a.ID, events.ResultStarted)
	if started.Executor != "child" {
		t.Fatalf("started by %q", started.Executor)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed = true
	openGate.Do(func() { close(gate) })
	if rs := finals(of(v.results(101), a.ID)); len(rs) != 0 {
		t.Fatalf("the killed child journalled a final result: %+v", rs)
	}

	second := v.run(config(func(c *executor.Config) { c.Name, c.AckWait = "second", time.Second }), nil)
	r := v.waitResult(101, a.ID, "final")
	// The ack follows the final result; this executor abandons work on
	// stop (DrainTimeout -1), so let the ack land first.
	for deadline := time.Now().Add(30 * time.Second); v.consumerInfo().NumAckPending != 0; {
		if time.Now().After(deadline) {
			t.Fatal("the resumed action was never acknowledged")
		}
		<-time.After(10 * time.Millisecond) // polling the server's count, not ordering
	}
	if err := second.stop(); err != nil {
		t.Fatal(err)
	}
	rs := of(v.results(101), a.ID)
	if f := finals(rs); len(f) != 1 {
		t.Fatalf("%d final results, want 1: %+v", len(f), rs)
	}
	if len(rs) != 2 || r.Status != events.ResultSucceeded || r.UPID != started.UPID || r.Executor != "second" {
		t.Fatalf("results after the crash: %+v", rs)
	}
	if n := len(v.tasks(101, "qmstart")); n != 1 {
		t.Fatalf("%d start tasks, want 1: the mutation was issued again", n)
	}
	if info := v.consumerInfo(); info.NumAckPending != 0 {
		t.Fatalf("%d actions still unacknowledged", info.NumAckPending)
	}
}

// lockedBuffer collects a child's output.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// findFailsFirst is *pve.Client whose first task list read fails with
// err: a 503 of an overloaded node (transient), or a refusal.
type findFailsFirst struct {
	*pve.Client
	err    error
	failed atomic.Bool
}

func (p *findFailsFirst) FindTask(ctx context.Context, ref pve.GuestRef, op pve.Op, since time.Time) (pve.TaskRef, bool, error) {
	if p.failed.CompareAndSwap(false, true) {
		return pve.TaskRef{}, false, p.err
	}
	return p.Client.FindTask(ctx, ref, op, since)
}

// TestUnjournalledRebootLookupFails: an executor dies after Proxmox
// accepted a reboot but before its task was journalled, and its
// successor's task list read fails. A running guest reads as running
// before and after a reboot, so no status pre-check can tell whether the
// reboot went out: after a transient failure the successor leaves the
// action for its redelivery, which finds the task and adopts it; after
// any other it fails the action without rebooting. One reboot task, never
// two.
func TestUnjournalledRebootLookupFails(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
	}{
		{"transient", &pve.Error{Class: pve.ClassTransient, Op: pve.OpTaskStatus, Message: "503 service unavailable"}},
		{"refused", &pve.Error{Class: pve.ClassUnauthorized, Op: pve.OpTaskStatus, Message: "403 Permission check failed"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := newEnv(t)
			v.addGuest(pvesim.GuestSpec{VMID: 101, Running: true})
			// The reboot is still running when the successor first looks
			// for it.
			v.faults(func(f *pvesim.Faults) { f.TaskLatency = pvesim.Duration(time.Second) })
			cfg := config(func(c *executor.Config) { c.AckWait = 300 * time.Millisecond })
			a := action(101, events.OpReboot)
			tr := dieAfterIssuing(t, v, cfg, a)
			finder := &findFailsFirst{Client: v.px, err: c.err}
			v.run(cfg, finder)
			r := v.waitResult(101, a.ID, "final")
			if !finder.failed.Load() {
				t.Fatal("the successor never looked the task up")
			}
			if c.name == "transient" {
				checkJournalled(t, of(v.results(101), a.ID), events.ResultSucceeded)
				if r.UPID != tr.UPID {
					t.Fatalf("finished %q, want the issued task %q adopted", r.UPID, tr.UPID)
				}
			} else if r.Status != events.ResultFailed || !strings.Contains(r.Error, "not rebooted again") || r.Observed == nil {
				t.Fatalf("after a refused lookup: %+v", r.Result)
			}
			if n := len(v.tasks(101, "qmreboot")); n != 1 {
				t.Fatalf("%d reboot tasks, want 1: the guest was rebooted again after a failed task lookup", n)
			}
		})
	}
}
