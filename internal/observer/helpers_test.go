package observer_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/bus/bustest"
	"github.com/converge-pve/converge/internal/clock/clocktest"
	"github.com/converge-pve/converge/internal/observer"
	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/internal/pvesim/pvesimtest"
)

const simSecret = pvesimtest.TokenSecret

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// refresh is the tests' ConfigRefresh: long, so that the few seconds the
// tests advance the clock between passes make a periodic re-read unlikely
// unless a test asks for one (the schedule is deterministic for t0).
const refresh = 24 * time.Hour

var (
	startSim  = pvesimtest.Start   // a simulator on a loopback port for the test's lifetime
	newClient = pvesimtest.Client  // a client for it
	tctx      = pvesimtest.Context // a context bound to the test
)

// clock is an injected clock that moves only when told to.
type clock struct{ *clocktest.Fake }

func newClock() *clock { return &clock{clocktest.New(t0)} }

// Advance moves the clock and returns the new time.
func (c *clock) Advance(d time.Duration) time.Time {
	c.Fake.Advance(d)
	return c.Now()
}

func newObserver(t *testing.T, px observer.Proxmox, b *bus.Bus, clk *clock, mod ...func(*observer.Config)) *observer.Observer {
	t.Helper()
	cfg := observer.DefaultConfig()
	cfg.Name, cfg.Interval, cfg.ConfigRefresh, cfg.Clock, cfg.Logger = "observer@test", time.Hour, refresh, clk.Fake, zerolog.Nop()
	for _, m := range mod {
		m(&cfg)
	}
	o, err := observer.New(cfg, px, b)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// journal reads what was published to the stream after a sequence.
type journal struct {
	t   *testing.T
	b   *bus.Bus
	seq uint64
}

func newJournal(t *testing.T, b *bus.Bus) *journal {
	j := &journal{t: t, b: b}
	j.seq = j.lastSeq()
	return j
}

func (j *journal) lastSeq() uint64 {
	j.t.Helper()
	s, err := j.b.Stream(tctx(j.t))
	if err != nil {
		j.t.Fatal(err)
	}
	info, err := s.Info(tctx(j.t))
	if err != nil {
		j.t.Fatal(err)
	}
	return info.State.LastSeq
}

// batch is what one or more passes published.
type batch struct {
	observed   map[int]events.Observed
	order      []int
	heartbeats []events.Heartbeat
}

// next returns the events published since the previous call.
func (j *journal) next() batch {
	j.t.Helper()
	ctx := tctx(j.t)
	s, err := j.b.Stream(ctx)
	if err != nil {
		j.t.Fatal(err)
	}
	last := j.lastSeq()
	out := batch{observed: map[int]events.Observed{}}
	for seq := j.seq + 1; seq <= last; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			j.t.Fatalf("get %d: %v", seq, err)
		}
		info, err := events.ParseSubject(m.Subject)
		if err != nil {
			j.t.Fatal(err)
		}
		switch info.Kind {
		case events.KindObserved:
			ob, err := events.Decode[events.Observed](m.Data)
			if err != nil {
				j.t.Fatal(err)
			}
			if ob.VMID != info.VMID {
				j.t.Fatalf("observed body vmid %d on subject %s", ob.VMID, m.Subject)
			}
			if _, dup := out.observed[ob.VMID]; dup {
				j.t.Fatalf("vmid %d observed twice in one batch", ob.VMID)
			}
			out.observed[ob.VMID] = ob
			out.order = append(out.order, ob.VMID)
		case events.KindHeartbeat:
			hb, err := events.Decode[events.Heartbeat](m.Data)
			if err != nil {
				j.t.Fatal(err)
			}
			out.heartbeats = append(out.heartbeats, hb)
		default:
			j.t.Fatalf("unexpected event on %s", m.Subject)
		}
	}
	j.seq = last
	return out
}

func (b batch) String() string {
	return fmt.Sprintf("observed %v, %d heartbeats", b.order, len(b.heartbeats))
}

func pass(t *testing.T, o *observer.Observer) observer.PassStats {
	t.Helper()
	st, err := o.Pass(tctx(t))
	if err != nil {
		t.Fatalf("pass: %v", err)
	}
	return st
}

func mustTask(t *testing.T, c *pve.Client, tr pve.TaskRef, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitTask(tctx(t), tr, pve.WaitOptions{}); err != nil {
		t.Fatalf("task %s: %v", tr.UPID, err)
	}
}

func ref(t *testing.T, s *pvesim.Sim, vmid int) pve.GuestRef {
	t.Helper()
	g, ok := s.Guest(vmid)
	if !ok {
		t.Fatalf("no guest %d", vmid)
	}
	return pve.GuestRef{Kind: pve.Kind(g.Kind), Node: g.Node, VMID: vmid}
}

// onlyHeartbeat asserts that a batch holds one heartbeat and nothing else.
func onlyHeartbeat(t *testing.T, b batch, reachable bool) events.Heartbeat {
	t.Helper()
	if len(b.observed) != 0 || len(b.heartbeats) != 1 {
		t.Fatalf("want only a heartbeat, got %s", b)
	}
	if hb := b.heartbeats[0]; hb.Reachable != reachable {
		t.Fatalf("heartbeat reachable=%v, want %v (%+v)", hb.Reachable, reachable, hb)
	}
	return b.heartbeats[0]
}

// runDemo runs an observer of a demo simulator in the background (Run),
// with a subscription to its heartbeats; stop ends Run and returns what
// it returned.
func runDemo(t *testing.T) (o *observer.Observer, b *bus.Bus, clk *clock, ctx context.Context, sub *nats.Subscription, stop func() error) {
	t.Helper()
	_, c := demo(t)
	b = bustest.New(t)
	clk = newClock()
	o = newObserver(t, c, b, clk)
	sub, err := b.NC.SubscribeSync(events.ClusterSubject(events.KindHeartbeat, "pve"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(tctx(t))
	done := make(chan error, 1)
	go func() { done <- o.Run(ctx) }()
	return o, b, clk, ctx, sub, func() error { cancel(); return <-done }
}
