package planner

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/projector"
)

// TestFleetSim: a fleet change of guests on nodes (cores 2 -> 4, restart
// allowed: set_config then reboot), or stopped guests started, run by a
// simulated executor (a write takes 1 round, a node task 5 rounds). Every
// guest converges; before the first node task at most two slots' worth of
// writes a node are handed out, and at most that many guests are ever
// half-changed (begun.go); the planning stays within a bound per guest
// (each plan counted, deterministic). FLEET_SIM_GUESTS, FLEET_SIM_NODES,
// FLEET_SIM_TASK and FLEET_SIM_KIND=start change the fleet (the figures
// are logged: -v).
func TestFleetSim(t *testing.T) {
	for _, kind := range []string{"change", "start"} {
		t.Run(kind, func(t *testing.T) { fleetSim(t, kind) })
	}
}

func fleetSim(t *testing.T, kind string) {
	if k := os.Getenv("FLEET_SIM_KIND"); k != "" && k != kind {
		t.Skip("FLEET_SIM_KIND=" + k)
	}
	env := func(k string, def int) int {
		if n, err := strconv.Atoi(os.Getenv(k)); err == nil {
			return n
		}
		return def
	}
	guests, nodes, task := env("FLEET_SIM_GUESTS", 2000), env("FLEET_SIM_NODES", 10), env("FLEET_SIM_TASK", 5)
	start := kind == "start"
	cfg := configNamed("sim")
	cfg.Policy.ObserverTimeout = 1000 * time.Hour
	cfg.Limits.GuardMin = 1 << 30 // the guard is not what is simulated
	decisions := 0
	callers := map[string]int{}
	cfg.OnDecision = func(*projector.View, Decision) {
		decisions++
		if os.Getenv("FLEET_SIM_CALLERS") != "" {
			pc := make([]uintptr, 12)
			n := runtime.Callers(3, pc)
			fr := runtime.CallersFrames(pc[:n])
			key := ""
			for {
				f, more := fr.Next()
				name := f.Function[strings.LastIndex(f.Function, ".")+1:]
				if name != "planGuest" && name != "func1" {
					key += name + "<"
				}
				if name == "Fold" || name == "Tick" || !more {
					break
				}
			}
			callers[key]++
		}
	}
	defer func() {
		for k, n := range callers {
			if n > guests/10 {
				t.Logf("%8d %s", n, k)
			}
		}
	}()
	now := t0
	e, fold := simEngine(t, cfg, &now)
	_ = e.Ready()
	obs := func(vmid int, status string, cores int, pending map[string]string) *events.Observed {
		return &events.Observed{Meta: events.NewMeta("observer", "", now), VMID: vmid, Cluster: "pve", Exists: true,
			Node: fmt.Sprintf("pve%d", vmid%nodes), Kind: events.QEMU, Status: status, Digest: "d",
			Config: events.GuestConfig{Cores: cores}, Pending: pending, ReadAt: now, Source: events.SourceObserver}
	}
	for vmid := 1000; vmid < 1000+guests; vmid++ {
		st := "running"
		if start {
			st = "stopped"
		}
		fold(events.KindObserved, vmid, mustJSON(obs(vmid, st, 2, nil)))
	}
	_ = e.Ready()
	decisions = 0
	t1 := time.Now()
	for vmid := 1000; vmid < 1000+guests; vmid++ {
		d := fmt.Sprintf(`{"vmid":%d,"cores":4,"restart":"allowed"}`, vmid)
		if start {
			d = fmt.Sprintf(`{"vmid":%d,"power":"running"}`, vmid)
		}
		fold(events.KindDesired, vmid, []byte(d))
	}
	t.Logf("desired folded: %s, %d decisions", time.Since(t1).Round(time.Millisecond), decisions)
	type flight struct {
		a    events.Action
		done int
	}
	var inflight []flight
	writeDone := map[int]int{}
	half, maxHalf, maxWait, firstTask, handed, round := 0, 0, 0, -1, 0, 0
	r := e.Ready()
	for ; round < 100000; round++ {
		now = now.Add(100 * time.Millisecond)
		for _, p := range r.Actions {
			if NodeTask(p.Action.Op) && firstTask < 0 {
				firstTask = handed
			}
			handed++
			if p.Action.Op == events.OpReboot {
				if w, ok := writeDone[p.Action.VMID]; ok {
					maxWait = max(maxWait, round-w)
					half--
				}
			}
			fold(events.KindAction, p.Action.VMID, mustJSON(p.Action))
			e.Published(p.Action.VMID, p.Action.ID, false)
			d := 1
			if NodeTask(p.Action.Op) {
				d = task
			}
			inflight = append(inflight, flight{p.Action, round + d})
		}
		keep := inflight[:0]
		for _, f := range inflight {
			if f.done > round {
				keep = append(keep, f)
				continue
			}
			var o *events.Observed
			switch f.a.Op {
			case events.OpSetConfig:
				o = obs(f.a.VMID, "running", 2, map[string]string{"cores": "4"})
				writeDone[f.a.VMID] = round
				half++
				maxHalf = max(maxHalf, half)
			case events.OpReboot:
				o = obs(f.a.VMID, "running", 4, nil)
			case events.OpStart:
				o = obs(f.a.VMID, "running", 2, nil)
			default:
				t.Fatalf("op %s", f.a.Op)
			}
			o.Source = events.SourceExecutor
			res := events.Result{Meta: events.NewMeta("x", f.a.CorrelationID, now), ActionID: f.a.ID, VMID: f.a.VMID, Cluster: "pve",
				Op: f.a.Op, Status: events.ResultSucceeded, Executor: "x", Observed: o}
			fold(events.KindResult, f.a.VMID, mustJSON(res))
		}
		inflight = keep
		e.Tick(now)
		r = e.Ready()
		if len(inflight) == 0 && len(r.Actions) == 0 {
			break
		}
	}
	c := e.Counts()
	t.Logf("guests=%d nodes=%d task=%d start=%v: rounds=%d decisions=%d (%.1f/guest) cpu=%s actions=%d before-first-task=%d max-half-changed=%d max-write-to-reboot-wait=%d rounds; converged=%d",
		guests, nodes, task, start, round, decisions, float64(decisions)/float64(guests), time.Since(t1).Round(time.Millisecond), handed, firstTask, maxHalf, maxWait, c[Converged])
	window := nodes * 2 * DefaultNodeConcurrency
	switch {
	case c[Converged] != guests:
		t.Fatalf("%d of %d converged", c[Converged], guests)
	case firstTask > window || maxHalf > window:
		t.Fatalf("%d actions before the first node task, %d guests half-changed at most; want at most %d (two slots' worth a node)", firstTask, maxHalf, window)
	case decisions > 12*guests:
		t.Fatalf("%d plans for %d guests (%.1f a guest); want at most 12 a guest", decisions, guests, float64(decisions)/float64(guests))
	}
}

// TestStartFleetPlansOnce: a fleet start (stopped guests desired running:
// no write, nothing begins) plans each arriving guest about once: a waiter
// that arrives while the node's slots are full does not plan the line's
// heads again for room to begin that none of them can use (headRoom).
func TestStartFleetPlansOnce(t *testing.T) {
	const guests = 1000
	cfg := configNamed("sim")
	cfg.Policy.ObserverTimeout = 1000 * time.Hour
	decisions := 0
	cfg.OnDecision = func(*projector.View, Decision) { decisions++ }
	now := t0
	e, fold := simEngine(t, cfg, &now)
	for vmid := 1000; vmid < 1000+guests; vmid++ {
		fold(events.KindObserved, vmid, mustJSON(&events.Observed{Meta: events.NewMeta("observer", "", t0), VMID: vmid, Cluster: "pve",
			Exists: true, Node: "pve1", Kind: events.QEMU, Status: "stopped", Digest: "d", ReadAt: t0, Source: events.SourceObserver}))
	}
	_ = e.Ready()
	decisions = 0
	for vmid := 1000; vmid < 1000+guests; vmid++ {
		fold(events.KindDesired, vmid, []byte(fmt.Sprintf(`{"vmid":%d,"power":"running"}`, vmid)))
	}
	if n := len(e.Ready().Actions); n != DefaultNodeConcurrency {
		t.Fatalf("%d actions", n)
	}
	if decisions > guests+guests/10 {
		t.Errorf("%d guests arriving planned %d times (%.1f a guest); want about one each", guests, decisions, float64(decisions)/guests)
	}
}

// simEngine is an engine folding one event at a time at *now (the caller
// moves it), caught up after a heartbeat.
func simEngine(t *testing.T, cfg Config, now *time.Time) (*Engine, func(kind events.Kind, vmid int, body []byte)) {
	t.Helper()
	e, err := NewEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	seq := uint64(0)
	fold := func(kind events.Kind, vmid int, body []byte) {
		seq++
		subj := events.ClusterSubject(kind, "pve")
		if vmid != 0 {
			subj = events.StoredSubject(kind, "pve", vmid, DefaultPartitions)
		}
		e.Fold([]projector.Event{{Seq: seq, Subject: subj, Data: body, Time: *now}}, 0, *now)
	}
	fold(events.KindHeartbeat, 0, mustJSON(events.Heartbeat{Meta: events.NewMeta("o", "", *now), Cluster: "pve", Reachable: true}))
	e.Begin(seq, *now)
	e.Tick(*now)
	return e, fold
}
