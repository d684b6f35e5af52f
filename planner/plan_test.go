package planner

import (
	"strconv"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/projector"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func fresh() projector.ClusterState {
	return projector.ClusterState{Cluster: "pve", HeartbeatAt: t0, Reachable: true}
}

func ptr[T any](v T) *T { return &v }

func policy() Policy {
	p := DefaultPolicy()
	if err := p.Validate(); err != nil {
		panic(err)
	}
	return p
}

// genDesired draws a desired state managing a random subset of fields.
func genDesired(t *rapid.T, vmid int) *events.Desired {
	d := &events.Desired{VMID: vmid}
	if rapid.Bool().Draw(t, "power?") {
		d.Power = ptr(rapid.SampledFrom([]events.Power{events.PowerRunning, events.PowerStopped}).Draw(t, "power"))
	}
	if rapid.Bool().Draw(t, "cores?") {
		d.Cores = ptr(rapid.IntRange(1, 8).Draw(t, "cores"))
	}
	if rapid.Bool().Draw(t, "mem?") {
		d.MemoryMiB = ptr(rapid.SampledFrom([]int{512, 1024, 2048, 4096}).Draw(t, "mem"))
	}
	if rapid.Bool().Draw(t, "name?") {
		d.Name = ptr(rapid.SampledFrom([]string{"web", "db", "cache"}).Draw(t, "name"))
	}
	if rapid.Bool().Draw(t, "desc?") {
		d.Description = ptr(rapid.SampledFrom([]string{"", "hello", "two\nlines\n", "trailing  "}).Draw(t, "desc"))
	}
	if rapid.Bool().Draw(t, "tags?") {
		d.Tags = ptr(rapid.SliceOfDistinct(rapid.SampledFrom([]string{"Prod", "web", "db", "EU"}), func(s string) string { return s }).Draw(t, "tags"))
	}
	if rapid.Bool().Draw(t, "onboot?") {
		d.OnBoot = ptr(rapid.Bool().Draw(t, "onboot"))
	}
	return d
}

// genObserved draws an existing, unlocked guest with random config, status
// and pending values.
func genObserved(t *rapid.T, vmid int) *events.Observed {
	o := &events.Observed{VMID: vmid, Cluster: "pve", Exists: true, Node: "pve1",
		Kind:   rapid.SampledFrom([]events.GuestKind{events.QEMU, events.LXC}).Draw(t, "kind"),
		Status: rapid.SampledFrom([]string{"running", "stopped"}).Draw(t, "status"),
		Config: events.GuestConfig{
			Name:        rapid.SampledFrom([]string{"web", "old"}).Draw(t, "oname"),
			Description: rapid.SampledFrom([]string{"", "hello", "other"}).Draw(t, "odesc"),
			Tags:        rapid.SliceOfDistinct(rapid.SampledFrom([]string{"prod", "web"}), func(s string) string { return s }).Draw(t, "otags"),
			Cores:       rapid.IntRange(1, 8).Draw(t, "ocores"),
			MemoryMiB:   rapid.SampledFrom([]int{512, 1024, 2048}).Draw(t, "omem"),
			OnBoot:      rapid.Bool().Draw(t, "oonboot"),
		},
		Digest: "d0", ReadAt: t0, Source: events.SourceObserver,
	}
	if o.Status == "running" && rapid.Bool().Draw(t, "pending?") {
		o.Pending = map[string]string{"cores": strconv.Itoa(rapid.IntRange(1, 8).Draw(t, "pcores"))}
	}
	return o
}

func viewOf(d *events.Desired, o *events.Observed) *projector.View {
	return &projector.View{VMID: d.VMID, Cluster: "pve", Desired: d, DesiredSeq: 1, Observed: o, ObservedSeq: 2}
}

// apply plays one step against the observed guest the way Proxmox does:
// QEMU cores and memory written to a running guest wait in pending until a
// restart; everything else applies at once.
func apply(o *events.Observed, s Step) *events.Observed {
	n := *o
	n.Config.Tags = append([]string(nil), o.Config.Tags...)
	n.Pending = map[string]string{}
	for k, v := range o.Pending {
		n.Pending[k] = v
	}
	setKey := func(k, v string, c *events.GuestConfig) {
		switch k {
		case "name":
			c.Name = v
		case "description":
			c.Description = v
		case "tags":
			c.Tags = nil
			if v != "" {
				c.Tags = append(c.Tags, splitTags(v)...)
			}
		case "cores":
			c.Cores, _ = strconv.Atoi(v)
		case "memory":
			c.MemoryMiB, _ = strconv.Atoi(v)
		case "onboot":
			c.OnBoot = v == "1"
		}
	}
	applyPending := func() {
		for k, v := range n.Pending {
			setKey(k, v, &n.Config)
		}
		n.Pending = nil
	}
	switch s.Op {
	case events.OpSetConfig:
		for k, v := range s.Set {
			if n.Status == "running" && n.Kind == events.QEMU && (k == "cores" || k == "memory") {
				n.Pending[k] = v
				continue
			}
			setKey(k, v, &n.Config)
			delete(n.Pending, k)
		}
		for _, k := range s.Delete {
			setKey(k, "", &n.Config)
			delete(n.Pending, k)
		}
		for _, k := range s.Revert {
			delete(n.Pending, k)
		}
	case events.OpStart:
		applyPending()
		n.Status = "running"
	case events.OpReboot:
		applyPending()
	case events.OpShutdown, events.OpStop:
		n.Status = "stopped"
	}
	if len(n.Pending) == 0 {
		n.Pending = nil
	}
	n.Digest += "'"
	return &n
}

func splitTags(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ';' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}

// TestPlanConvergedGivesNoActions: a guest that already matches its desired
// state needs nothing.
func TestPlanConvergedGivesNoActions(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d := genDesired(t, 101)
		o := genObserved(t, 101)
		o.Pending = nil
		if d.Power != nil {
			o.Status = string(*d.Power)
		}
		if d.Cores != nil {
			o.Config.Cores = *d.Cores
		}
		if d.MemoryMiB != nil {
			o.Config.MemoryMiB = *d.MemoryMiB
		}
		if d.Name != nil {
			o.Config.Name = *d.Name
		}
		if d.Description != nil {
			o.Config.Description = *d.Description + "\n" // Proxmox round trips are not drift
		}
		if d.Tags != nil {
			o.Config.Tags = nil
			for i := len(*d.Tags) - 1; i >= 0; i-- {
				o.Config.Tags = append(o.Config.Tags, (*d.Tags)[i]) // other order, other case
			}
		}
		if d.OnBoot != nil {
			o.Config.OnBoot = *d.OnBoot
		}
		dec := Plan(viewOf(d, o), fresh(), policy(), t0)
		if len(dec.Steps) != 0 || dec.Status.Kind != Converged {
			t.Fatalf("converged guest got %+v", dec)
		}
	})
}

// TestPlanConvergesInBoundedSteps: applying the first planned action and
// planning again reaches a state with nothing left to do within four
// actions (stop, config, start or config, reboot at most).
func TestPlanConvergesInBoundedSteps(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d := genDesired(t, 101)
		o := genObserved(t, 101)
		p := policy()
		p.Restart = events.RestartAllowed // a running guest converges only if it may be restarted
		for i := 0; ; i++ {
			dec := Plan(viewOf(d, o), fresh(), p, t0)
			if len(dec.Steps) == 0 {
				if d.Power != nil && o.Status != string(*d.Power) {
					t.Fatalf("stopped planning with power %s, want %s: %+v", o.Status, *d.Power, dec)
				}
				if d.Power != nil && *d.Power == events.PowerRunning && dec.Status.Kind != Converged {
					t.Fatalf("desired running guest did not converge: %+v", dec.Status)
				}
				if d.Power == nil && dec.Status.Kind != Converged && dec.Status.Kind != Pending {
					t.Fatalf("unexpected end state %+v", dec.Status)
				}
				return
			}
			if i == 4 {
				t.Fatalf("not converged after 4 actions; next %+v", dec.Steps)
			}
			o = apply(o, dec.Steps[0])
		}
	})
}

// TestPlanNeverStopsDesiredRunning: whatever the observed state, a guest
// whose desired power is running is never shut down or stopped.
func TestPlanNeverStopsDesiredRunning(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d := genDesired(t, 101)
		d.Power = ptr(events.PowerRunning)
		o := genObserved(t, 101)
		for _, s := range Plan(viewOf(d, o), fresh(), policy(), t0).Steps {
			if s.Op == events.OpShutdown || s.Op == events.OpStop {
				t.Fatalf("planned %s for a guest desired running", s.Op)
			}
		}
	})
}

// TestPlanHolds covers the cases where Plan must not act at all.
func TestPlanHolds(t *testing.T) {
	d := &events.Desired{VMID: 101, Power: ptr(events.PowerRunning)}
	o := &events.Observed{VMID: 101, Exists: true, Kind: events.QEMU, Status: "stopped", Node: "pve1", ReadAt: t0}
	p := policy()
	for _, tc := range []struct {
		name string
		v    *projector.View
		c    projector.ClusterState
		now  time.Time
		want StatusKind
	}{
		{"no desired state (invariant 7)", &projector.View{VMID: 101, Observed: o}, fresh(), t0, Unmanaged},
		{"rejected desired event", &projector.View{VMID: 101, Desired: d, Observed: o, Rejected: &projector.Rejection{Seq: 9, Reason: "cores: minimum"}}, fresh(), t0, Rejected},
		{"action in flight", &projector.View{VMID: 101, Desired: d, Observed: o, InFlight: &events.Action{Op: events.OpStart}}, fresh(), t0, Acting},
		{"not observed yet: waits for the observer's pass", viewOf(d, nil), fresh(), t0, Pending},
		{"not listed by a pass after the desired state, no clone", viewOf(d, nil), func() projector.ClusterState {
			c := fresh()
			c.PassAfterSeq = 100
			return c
		}(), t0, Error},
		{"missing, its template unknown", viewOf(&events.Desired{VMID: 101, Clone: &events.Clone{From: 9000}}, &events.Observed{VMID: 101}), fresh(), t0, Error},
		{"exists, not created by converge, desired with clone", viewOf(&events.Desired{VMID: 101, Clone: &events.Clone{From: 9000}}, o), fresh(), t0, Error},
		{"no heartbeat ever", viewOf(d, o), projector.ClusterState{}, t0, Blocked},
		{"observer silent (invariant 6)", viewOf(d, o), fresh(), t0.Add(time.Minute), Blocked},
		{"Proxmox unreachable (invariant 6)", viewOf(d, o), projector.ClusterState{HeartbeatAt: t0, Reachable: false, Error: "EOF"}, t0, Blocked},
		{"locked guest waits", viewOf(d, &events.Observed{VMID: 101, Exists: true, Kind: events.QEMU, Status: "stopped", Lock: "backup"}), fresh(), t0, Pending},
		{"missing guest is not created", viewOf(d, &events.Observed{VMID: 101, Exists: false}), fresh(), t0, Error},
		{"absent is behind the destroy gate", viewOf(&events.Desired{VMID: 101, Absent: true}, o), fresh(), t0, Blocked},
		{"power state unknown", viewOf(d, &events.Observed{VMID: 101, Exists: true, Kind: events.QEMU, Status: "unknown"}), fresh(), t0, Pending},
		{"template", viewOf(d, &events.Observed{VMID: 101, Exists: true, Kind: events.QEMU, Status: "stopped", Template: true}), fresh(), t0, Error},
		{"backoff after a transient failure", func() *projector.View {
			v := viewOf(d, o)
			v.Failures, v.LastFailureAt, v.LastError, v.LastErrorKind = 1, t0, "flock timeout", "transient"
			return v
		}(), fresh(), t0.Add(100 * time.Millisecond), Pending},
		{"terminal failure", func() *projector.View {
			v := viewOf(d, o)
			v.Failures, v.LastFailureAt, v.LastError, v.LastErrorKind, v.Terminal = 1, t0, "bad param", "terminal", true
			return v
		}(), fresh(), t0.Add(10 * time.Second), Error},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dec := Plan(tc.v, tc.c, p, tc.now)
			if dec.Status.Kind != tc.want || len(dec.Steps) != 0 {
				t.Fatalf("got %+v, want %s with no steps", dec, tc.want)
			}
			if dec.Status.Reason == "" && tc.want != Converged {
				t.Fatal("a held guest must say why")
			}
		})
	}
	// After the backoff the same failure is retried.
	v := viewOf(d, o)
	v.Failures, v.LastFailureAt, v.LastError, v.LastErrorKind = 1, t0, "flock timeout", "transient"
	if dec := Plan(v, fresh(), p, t0.Add(2*time.Second)); len(dec.Steps) != 1 || dec.Steps[0].Op != events.OpStart {
		t.Fatalf("retry after backoff: %+v", dec)
	}
	// A digest conflict re-plans at once from the fresh read.
	v.LastErrorKind = "conflict"
	if dec := Plan(v, fresh(), p, t0); len(dec.Steps) != 1 {
		t.Fatalf("conflict: %+v", dec)
	}
}

func TestPlanOrdersSteps(t *testing.T) {
	p := policy()
	p.Restart = events.RestartAllowed
	run := events.PowerRunning
	stop := events.PowerStopped
	for _, tc := range []struct {
		name   string
		d      *events.Desired
		o      *events.Observed
		want   []events.Op
		reason string
	}{
		{"stop, then write config so it applies at once",
			&events.Desired{VMID: 1, Power: &stop, Cores: ptr(4)},
			&events.Observed{Exists: true, Kind: events.QEMU, Status: "running", Config: events.GuestConfig{Cores: 2}},
			[]events.Op{events.OpShutdown, events.OpSetConfig}, ""},
		{"write config, then start so the guest boots with it",
			&events.Desired{VMID: 1, Power: &run, Cores: ptr(4)},
			&events.Observed{Exists: true, Kind: events.QEMU, Status: "stopped", Config: events.GuestConfig{Cores: 2}},
			[]events.Op{events.OpSetConfig, events.OpStart}, ""},
		{"running QEMU: cores need a reboot",
			&events.Desired{VMID: 1, Power: &run, Cores: ptr(4)},
			&events.Observed{Exists: true, Kind: events.QEMU, Status: "running", Config: events.GuestConfig{Cores: 2}},
			[]events.Op{events.OpSetConfig, events.OpReboot}, ""},
		{"running LXC: cores apply live",
			&events.Desired{VMID: 1, Power: &run, Cores: ptr(4)},
			&events.Observed{Exists: true, Kind: events.LXC, Status: "running", Config: events.GuestConfig{Cores: 2}},
			[]events.Op{events.OpSetConfig}, ""},
		{"pending value equal to desired: only the reboot",
			&events.Desired{VMID: 1, Power: &run, Cores: ptr(4)},
			&events.Observed{Exists: true, Kind: events.QEMU, Status: "running", Config: events.GuestConfig{Cores: 2}, Pending: map[string]string{"cores": "4"}},
			[]events.Op{events.OpReboot}, ""},
		{"power unmanaged, restart allowed: a running guest is rebooted",
			&events.Desired{VMID: 1, Cores: ptr(4)},
			&events.Observed{Exists: true, Kind: events.QEMU, Status: "running", Config: events.GuestConfig{Cores: 2}, Pending: map[string]string{"cores": "4"}},
			[]events.Op{events.OpReboot}, ""},
		{"the guest's restart: never overrides the deployment's",
			&events.Desired{VMID: 1, Power: &run, Cores: ptr(4), Restart: ptr(events.RestartNever)},
			&events.Observed{Exists: true, Kind: events.QEMU, Status: "running", Config: events.GuestConfig{Cores: 2}, Pending: map[string]string{"cores": "4"}},
			nil, "waits for a restart"},
		{"clearing description and tags deletes them",
			&events.Desired{VMID: 1, Description: ptr(""), Tags: &[]string{}},
			&events.Observed{Exists: true, Kind: events.QEMU, Status: "stopped", Config: events.GuestConfig{Description: "x", Tags: []string{"a"}}},
			[]events.Op{events.OpSetConfig}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.VMID, tc.o.ReadAt = 1, t0
			dec := Plan(viewOf(tc.d, tc.o), fresh(), p, t0)
			var ops []events.Op
			for _, s := range dec.Steps {
				ops = append(ops, s.Op)
				if s.Reason == "" {
					t.Fatalf("step without reason: %+v", s)
				}
			}
			if len(ops) != len(tc.want) {
				t.Fatalf("steps %v, want %v (%+v)", ops, tc.want, dec.Status)
			}
			for i := range ops {
				if ops[i] != tc.want[i] {
					t.Fatalf("steps %v, want %v", ops, tc.want)
				}
			}
			if tc.reason != "" && !contains(dec.Status.Reason, tc.reason) {
				t.Fatalf("reason %q, want it to mention %q", dec.Status.Reason, tc.reason)
			}
		})
	}
	dec := Plan(viewOf(&events.Desired{VMID: 1, Description: ptr(""), Tags: &[]string{}},
		&events.Observed{VMID: 1, Exists: true, Kind: events.QEMU, Status: "stopped", Config: events.GuestConfig{Description: "x", Tags: []string{"a"}}}), fresh(), p, t0)
	if s := dec.Steps[0]; len(s.Set) != 0 || len(s.Delete) != 2 {
		t.Fatalf("clearing: %+v", s)
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || (len(s) >= len(sub) && (s[:len(sub)] == sub || contains(s[1:], sub)))
}

func TestBackoff(t *testing.T) {
	p := policy()
	prev := time.Duration(0)
	for n := 1; n <= 20; n++ {
		b := p.Backoff(101, n)
		if b <= 0 || b > p.BackoffMax*5/4 {
			t.Fatalf("backoff(%d) = %v", n, b)
		}
		if n <= 5 && b < prev/2 {
			t.Fatalf("backoff shrank: %v after %v", b, prev)
		}
		prev = b
		if p.Backoff(101, n) != b {
			t.Fatal("backoff must be deterministic")
		}
	}
	if p.Backoff(101, 3) == p.Backoff(102, 3) && p.Backoff(103, 3) == p.Backoff(104, 3) {
		t.Fatal("no jitter between guests")
	}
}
