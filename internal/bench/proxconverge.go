package bench

import (
	"context"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/internal/app"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/natsserver"
	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/planner"
	"github.com/converge-pve/converge/projector"
)

// proxmoxBody is the Proxmox-shaped profiles' desired state of guest
// 100+i: running, with new cores and description (a config write and a
// start).
func proxmoxBody(i int) string {
	return `{"vmid":` + strconv.Itoa(100+i) + `,"power":"running","cores":` + strconv.Itoa(proxmoxCores) +
		`,"description":"` + proxmoxDescription + `"}`
}

// convergeTracker follows the planner's decisions: which guests it has
// observed, and when each converged at its desired state.
type convergeTracker struct {
	seen     sync.Map
	observed atomic.Int64
	// convergedAt[i] is when guest 100+i was first planned converged with
	// a desired state (unix ns), 0 before. Each guest gets one desired
	// event, so that is its target.
	convergedAt []int64
	done        atomic.Int64
}

func (t *convergeTracker) onDecision(v *projector.View, d planner.Decision) {
	i := v.VMID - 100
	if i < 0 || i >= len(t.convergedAt) {
		return
	}
	if v.Observed != nil {
		if _, loaded := t.seen.LoadOrStore(v.VMID, true); !loaded {
			t.observed.Add(1)
		}
	}
	if d.Status.Kind == planner.Converged && v.Desired != nil && v.DesiredSeq > 0 &&
		atomic.CompareAndSwapInt64(&t.convergedAt[i], 0, time.Now().UnixNano()) {
		t.done.Add(1)
	}
}

// runConverge runs converge, assembled as `converge up` assembles it (conv:
// its shipped defaults unless the options lift or override them), against
// the profile's simulator: every guest is observed, then every desired
// change is published at once, and the makespan runs until the last guest
// converged.
func runConverge(ctx context.Context, o ProxmoxOptions, conv applied, dir string, rep *ProxmoxReport) (*ProxmoxDetails, error) {
	// Config writes done within the call (a QEMU PUT) start no task: the
	// mutation log has them, their work runs inline for ConfigTask.
	var mu sync.Mutex
	var syncWrites []pvesim.TaskInfo
	sim, err := proxmoxSim(o, func(m pvesim.Mutation) {
		if m.Method != http.MethodPut || !strings.HasSuffix(m.Path, "/config") {
			return
		}
		node, _, _ := strings.Cut(strings.TrimPrefix(m.Path, "/api2/json/nodes/"), "/")
		mu.Lock()
		syncWrites = append(syncWrites, pvesim.TaskInfo{Node: node, Type: "qmconfig", ID: strconv.Itoa(m.VMID), Start: m.At, End: m.At.Add(o.ConfigTask)})
		mu.Unlock()
	})
	if err != nil {
		return nil, err
	}
	defer sim.Close()
	pc := conv.pve
	pc.URL, pc.TokenID, pc.TokenSecret, pc.Logger = sim.URL(), tokenID, tokenSecret, o.Logger
	px, err := pve.New(pc)
	if err != nil {
		return nil, err
	}
	tr := &convergeTracker{convergedAt: make([]int64, o.Guests)}
	cfg := conv.cfg
	cfg.Name, cfg.Roles, cfg.Embedded = "bench", app.All, &natsserver.Options{DataDir: dir, Name: "bench"}
	cfg.Proxmox, cfg.Logger = px, o.Logger
	cfg.Planner.Planner.OnDecision = tr.onDecision
	a, err := app.Start(context.WithoutCancel(ctx), cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		a.Stop()
		if err := a.Wait(); err != nil {
			o.Logger.Error().Err(err).Msg("bench roles stopped")
		}
	}()
	err = waitFor(ctx, 5*time.Minute, "first observation of every guest", func() (int, int, bool) {
		n := int(tr.observed.Load())
		o.Progress("observing guests", n, o.Guests)
		return n, o.Guests, n >= o.Guests
	})
	if err != nil {
		return nil, err
	}
	b := a.Bus()
	actions0 := streamCount(ctx, b, "pve.action.>")
	calls0, tasks0 := sim.Calls(), len(sim.Tasks())
	t0 := time.Now()
	if err := publishDesired(ctx, b.JS, o.Guests, proxmoxBody); err != nil {
		return nil, err
	}
	// Generous: a run far slower than the baseline still ends.
	limit := 10*time.Minute + time.Duration(o.Guests)*(o.PowerTask+o.ConfigTask+4*o.APILatency)
	err = waitForEvery(ctx, 50*time.Millisecond, limit, "convergence of every guest", func() (int, int, bool) {
		n := int(tr.done.Load())
		o.Progress("converging", n, o.Guests)
		return n, o.Guests, n >= o.Guests
	})
	if err != nil {
		return nil, err
	}
	var last int64
	for i := range tr.convergedAt {
		last = max(last, atomic.LoadInt64(&tr.convergedAt[i]))
	}
	rep.MakespanS = time.Unix(0, last).Sub(t0).Seconds()
	rep.PveCalls = sim.Calls() - calls0
	tasks := sim.Tasks()[tasks0:]
	rep.Tasks = len(tasks)
	rep.Actions = streamCount(ctx, b, "pve.action.>") - actions0
	if err := checkDone(sim, o.Guests, "converge"); err != nil {
		return nil, err
	}
	mu.Lock()
	writes := slices.Clone(syncWrites)
	mu.Unlock()
	det := convergeDetails(o, rep.NodeConcurrency, sim, append(slices.Clone(tasks), writes...), tr, t0, time.Unix(0, last).Sub(t0))
	// TaskTypes counts Proxmox's tasks only.
	det.TaskTypes, det.SyncConfigWrites = map[string]int{}, len(writes)
	for _, t := range tasks {
		det.TaskTypes[t.Type]++
	}
	return det, nil
}

// convergeDetails derives where the time went from the simulator's task
// log and the convergence times.
func convergeDetails(o ProxmoxOptions, slots int, sim *pvesim.Sim, tasks []pvesim.TaskInfo, tr *convergeTracker, t0 time.Time, makespan time.Duration) *ProxmoxDetails {
	det := &ProxmoxDetails{TaskTypes: map[string]int{}}
	type pair struct{ cfg, start *pvesim.TaskInfo }
	byGuest := map[string]*pair{}
	for i := range tasks {
		t := &tasks[i]
		det.TaskTypes[t.Type]++
		p := byGuest[t.ID]
		if p == nil {
			p = &pair{}
			byGuest[t.ID] = p
		}
		switch t.Type {
		case "qmconfig":
			if p.cfg == nil {
				p.cfg = t
			}
		case "qmstart":
			p.start = t // the last one: the one that started it
		}
	}
	var handoff, tail, head []int64
	for id, p := range byGuest {
		vmid, _ := strconv.Atoi(id)
		if p.cfg != nil {
			head = append(head, int64(p.cfg.Start.Sub(t0)))
		}
		if p.cfg != nil && p.start != nil {
			handoff = append(handoff, int64(p.start.Start.Sub(p.cfg.End)))
		}
		if i := vmid - 100; p.start != nil && i >= 0 && i < len(tr.convergedAt) {
			tail = append(tail, atomic.LoadInt64(&tr.convergedAt[i])-p.start.End.UnixNano())
		}
	}
	det.Handoff, det.Tail, det.Head = percentiles(handoff), percentiles(tail), percentiles(head)
	// Without a node limit, the slots are Proxmox's power tasks.
	if slots <= 0 {
		slots = PvePowerTasks
	}
	busy := time.Duration(o.Guests) * (2*o.APILatency + o.ConfigTask + o.PowerTask)
	if makespan > 0 {
		det.SlotUse = float64(busy) / float64(time.Duration(o.Nodes*slots)*makespan)
	}
	// The node slots bound node tasks; config writes take none.
	var nodeTasks []pvesim.TaskInfo
	for _, t := range tasks {
		if t.Type != "qmconfig" {
			nodeTasks = append(nodeTasks, t)
		}
	}
	det.MaxInFlight = maxInFlight(nodeTasks)
	det.ToConfig, det.ToStart, det.ConfigWriteRate = turnaround(tasks, slots)
	return det
}

// turnaround is how long a node's slot stays free: the k-th task to start
// on a node could start only once k − slots of its tasks had ended, so
// while the node has work queued, start(k) − end(k − slots) is the time
// from a task's end to the start of the one that takes its slot (the
// client's polls, read-backs, journal, planning and pacing). It is split
// by the type of the task that takes the slot: a config write, or a start.
// configRate is the nodes' mean rate of config tasks while they start any
// (per node, count − 1 over the span from the first to the last start).
func turnaround(tasks []pvesim.TaskInfo, slots int) (toConfig, toStart Latency, configRate float64) {
	starts, ends := map[string][]pvesim.TaskInfo{}, map[string][]time.Time{}
	for _, t := range tasks {
		starts[t.Node] = append(starts[t.Node], t)
		ends[t.Node] = append(ends[t.Node], t.End)
	}
	var cfgGaps, startGaps []int64
	n := 0
	for node, ss := range starts {
		es := ends[node]
		sort.Slice(ss, func(i, j int) bool { return ss[i].Start.Before(ss[j].Start) })
		sort.Slice(es, func(i, j int) bool { return es[i].Before(es[j]) })
		var first, last time.Time
		cfgs := 0
		for k, t := range ss {
			if t.Type == "qmconfig" {
				if cfgs++; first.IsZero() {
					first = t.Start
				}
				last = t.Start
			}
			if k < slots {
				continue
			}
			gap := int64(t.Start.Sub(es[k-slots]))
			if t.Type == "qmconfig" {
				cfgGaps = append(cfgGaps, gap)
			} else {
				startGaps = append(startGaps, gap)
			}
		}
		if span := last.Sub(first); cfgs > 1 && span > 0 {
			configRate += float64(cfgs-1) / span.Seconds()
			n++
		}
	}
	if n > 0 {
		configRate /= float64(n)
	}
	return percentiles(cfgGaps), percentiles(startGaps), configRate
}

// maxInFlight is the most tasks that ran at once on one node.
func maxInFlight(tasks []pvesim.TaskInfo) int {
	type edge struct {
		at    time.Time
		delta int
	}
	per := map[string][]edge{}
	for _, t := range tasks {
		end := t.End
		if end.IsZero() {
			end = time.Now()
		}
		per[t.Node] = append(per[t.Node], edge{t.Start, 1}, edge{end, -1})
	}
	most := 0
	for _, es := range per {
		// Ends before starts at the same instant: a slot handed over is
		// not two tasks.
		sort.Slice(es, func(i, j int) bool {
			if es[i].at.Equal(es[j].at) {
				return es[i].delta < es[j].delta
			}
			return es[i].at.Before(es[j].at)
		})
		n := 0
		for _, e := range es {
			n += e.delta
			most = max(most, n)
		}
	}
	return most
}

// streamCount is how many messages the journal holds on subjects matching
// filter; 0 when it cannot say.
func streamCount(ctx context.Context, b *bus.Bus, filter string) int {
	s, err := b.Stream(ctx)
	if err != nil {
		return 0
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return 0
	}
	n := 0
	for _, c := range info.State.Subjects {
		n += int(c)
	}
	return n
}
