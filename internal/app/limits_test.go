package app_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/app"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/natsserver"
	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/internal/pvesim/pvesimtest"
	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
)

// cluster is several converge processes (in one test process) on one
// NATS server, driving one simulator.
type cluster struct {
	t    *testing.T
	sim  *pvesim.Sim
	url  string
	apps []*app.App
}

func newCluster(t *testing.T, opts pvesim.Options) *cluster {
	t.Helper()
	sim := pvesimtest.Start(t, opts)
	srv, err := natsserver.Start(natsserver.Options{DataDir: t.TempDir(), Listen: "127.0.0.1:-1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	return &cluster{t: t, sim: sim, url: srv.ClientURL()}
}

// start runs one process with roles, the planner's limits and policy.
func (c *cluster) start(name string, roles app.Roles, limits planner.Limits, pol planner.Policy) *app.App {
	t := c.t
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cfg := app.DefaultConfig()
	cfg.Name, cfg.Roles, cfg.Bus.URLs = name, roles, c.url
	cfg.Proxmox, cfg.Logger = pvesimtest.Client(t, c.sim), zerolog.Nop()
	cfg.Observer.Interval = time.Second
	cfg.Planner.Planner.Limits, cfg.Planner.Planner.Policy = limits, pol
	a, err := app.Start(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = a.Wait() })
	c.apps = append(c.apps, a)
	return a
}

func (c *cluster) reader() views.Reader {
	store, err := c.apps[0].Bus().ViewStore()
	if err != nil {
		c.t.Fatal(err)
	}
	return views.Reader{Store: store, Cluster: events.DefaultCluster}
}

// states reads every guest's state from the views.
func (c *cluster) states() map[int]planner.StatusKind {
	docs, err := c.reader().List(pvesimtest.Context(c.t))
	if err != nil {
		return nil
	}
	out := map[int]planner.StatusKind{}
	for _, d := range docs {
		out[d.View.VMID] = d.Status.Kind
	}
	return out
}

// desire publishes desired state for each guest, all at once.
func (c *cluster) desire(ds ...*events.Desired) {
	c.t.Helper()
	for _, d := range ds {
		m, err := events.DesiredMessage(d, events.PublishOptions{Publisher: "test"})
		if err != nil {
			c.t.Fatal(err)
		}
		if _, err := c.apps[0].Bus().Append(pvesimtest.Context(c.t), m, journal.Expect{}); err != nil {
			c.t.Fatal(err)
		}
	}
}

// maxConcurrent is the most tasks the simulator ran at once on each node,
// from its own task list.
func maxConcurrent(tasks []pvesim.TaskInfo) map[string]int {
	type edge struct {
		at    time.Time
		delta int
	}
	byNode := map[string][]edge{}
	for _, tk := range tasks {
		end := tk.End
		if tk.Running || end.IsZero() {
			end = time.Now().Add(time.Hour)
		}
		byNode[tk.Node] = append(byNode[tk.Node], edge{tk.Start, +1}, edge{end, -1})
	}
	out := map[string]int{}
	for node, es := range byNode {
		// Ends before starts at the same instant: a slot handed on is not
		// two tasks at once.
		sort.Slice(es, func(i, j int) bool {
			if !es[i].at.Equal(es[j].at) {
				return es[i].at.Before(es[j].at)
			}
			return es[i].delta < es[j].delta
		})
		n := 0
		for _, e := range es {
			n += e.delta
			out[node] = max(out[node], n)
		}
	}
	return out
}

// Per-node concurrency holds across every planner and executor: 3 nodes,
// 60 stopped guests, 2 s tasks, --node-concurrency 2, two processes each
// running a planner and an executor. Every guest desired running: the
// simulator never runs more than 2 tasks per node at once, and all
// converge within 1.3 × the ideal schedule (20 guests per node ÷ 2 slots ×
// 2 s = 20 s).
func TestNodeConcurrencyAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for about 20 s")
	}
	const nodes, guests, slots, task = 3, 60, 2, 2 * time.Second
	c := newCluster(t, pvesim.Options{Nodes: nodes, Faults: pvesim.Faults{TaskLatency: pvesim.Duration(task)}})
	var ds []*events.Desired
	running := events.PowerRunning
	for i := range guests {
		id := 1000 + i
		if err := c.sim.AddGuest(pvesim.GuestSpec{VMID: id, Node: fmt.Sprintf("pve%d", i%nodes+1)}); err != nil {
			t.Fatal(err)
		}
		ds = append(ds, &events.Desired{VMID: id, Power: &running})
	}
	limits := planner.DefaultLimits()
	limits.NodeConcurrency = slots
	a1 := c.start("one", app.All, limits, planner.DefaultPolicy())
	a2 := c.start("two", app.Roles{Planner: true, Executor: true}, limits, planner.DefaultPolicy())
	// Both planners and both executors own partitions, and every guest has
	// been observed, before the change lands.
	if !until(60*time.Second, func() bool {
		split := len(a1.Planner().Owned()) > 0 && len(a2.Planner().Owned()) > 0 &&
			len(a1.Executors()[0].Partitions()) > 0 && len(a2.Executors()[0].Partitions()) > 0 &&
			len(a1.Planner().Owned())+len(a2.Planner().Owned()) == planner.DefaultPartitions &&
			len(a1.Executors()[0].Partitions())+len(a2.Executors()[0].Partitions()) == planner.DefaultPartitions
		return split && len(c.states()) == guests
	}) {
		t.Fatalf("setup: planners own %v and %v, executors %v and %v, %d guests seen", a1.Planner().Owned(), a2.Planner().Owned(),
			a1.Executors()[0].Partitions(), a2.Executors()[0].Partitions(), len(c.states()))
	}

	start := time.Now()
	c.desire(ds...)
	var last map[int]planner.StatusKind
	converged := func() bool {
		last = c.states()
		for _, d := range ds {
			if last[d.VMID] != planner.Converged {
				return false
			}
		}
		return true
	}
	ideal := time.Duration(guests/nodes/slots) * task
	if !until(3*ideal, converged) {
		t.Fatalf("not converged after %s: %v", 3*ideal, last)
	}
	took := time.Since(start)
	peak := maxConcurrent(c.sim.Tasks())
	starts := 0
	for _, tk := range c.sim.Tasks() {
		if tk.Type == "qmstart" {
			starts++
		}
	}
	t.Logf("%d guests on %d nodes, %d slots per node, %s tasks: converged in %s, ideal %s (ratio %.2f); peak tasks per node %v; %d start tasks",
		guests, nodes, slots, task, took.Round(10*time.Millisecond), ideal, took.Seconds()/ideal.Seconds(), peak, starts)
	for node, n := range peak {
		if n > slots {
			t.Errorf("node %s ran %d tasks at once, limit %d", node, n, slots)
		}
	}
	if starts != guests {
		t.Errorf("%d start tasks, want one per guest (%d)", starts, guests)
	}
	if limit := ideal * 13 / 10; took > limit {
		t.Errorf("converged in %s, more than 1.3 × the ideal %s", took, ideal)
	}
}
