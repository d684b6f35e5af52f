package app

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/internal/api"
	"github.com/converge-pve/converge/internal/clock/clocktest"
	"github.com/converge-pve/converge/internal/journal/journaltest"
	"github.com/converge-pve/converge/internal/pve"
)

// invProxmox answers Inventory with err and counts the calls.
type invProxmox struct {
	Proxmox
	err   error
	calls int
}

func (p *invProxmox) Inventory(context.Context) ([]pve.Resource, error) {
	p.calls++
	return nil, p.err
}

func findCheck(cs []api.Check, name string) api.Check {
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	return api.Check{Name: name, Reason: "missing"}
}

// The journal probe stores nothing, and says why writes fail.
func TestJournalProbe(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	j := journaltest.New(16, clk.Now)
	connected := true
	r := &readiness{cfg: ReadyConfig{Clock: clk, Interval: time.Second, ProxmoxFresh: 30 * time.Second}, log: zerolog.Nop(),
		conns: []probeConn{{name: "journal", subject: "pve.heartbeat.pve", connected: func() bool { return connected }, j: j}}}
	ctx := context.Background()
	if c := findCheck(r.checks(), "journal"); c.OK {
		t.Fatalf("ready before any probe: %+v", c)
	}
	r.refresh(ctx)
	if c := findCheck(r.checks(), "journal"); !c.OK {
		t.Fatalf("writable journal: %+v", c)
	}
	if n := len(j.Entries()); n != 0 {
		t.Fatalf("the probe stored %d entries", n)
	}
	j.FailAppends(errors.New("insufficient resources"), 0)
	r.refresh(ctx)
	if c := findCheck(r.checks(), "journal"); c.OK || !strings.Contains(c.Reason, "insufficient resources") {
		t.Fatalf("refused write: %+v", c)
	}
	connected = false
	r.refresh(ctx)
	if c := findCheck(r.checks(), "journal"); c.OK || c.Reason != "not connected to NATS" {
		t.Fatalf("disconnected: %+v", c)
	}
}

// Proxmox is asked at most once per ProxmoxFresh, and not while an
// observer's passes answer.
func TestProxmoxProbeBounded(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	cfg := ReadyConfig{Clock: clk, Interval: time.Second, ProxmoxFresh: 30 * time.Second}
	ctx := context.Background()

	px := &invProxmox{}
	r := &readiness{cfg: cfg, log: zerolog.Nop(), px: &pxWatch{Proxmox: px, clock: clk}, started: clk.Now()}
	for range 10 {
		r.refresh(ctx)
		clk.Advance(time.Second)
	}
	if px.calls != 1 {
		t.Fatalf("executor alone, 10 probes in 10s: %d inventory calls, want 1", px.calls)
	}
	if c := findCheck(r.checks(), "proxmox"); !c.OK {
		t.Fatalf("Proxmox answered: %+v", c)
	}
	clk.Advance(20 * time.Second)
	px.err = &pve.Error{Op: pve.OpInventory, Class: pve.ClassTransient, Err: errors.New("connection refused")}
	r.refresh(ctx)
	if c := findCheck(r.checks(), "proxmox"); px.calls != 2 || c.OK || !strings.Contains(c.Reason, "unreachable") {
		t.Fatalf("after 30s, unreachable: %d calls, %+v", px.calls, c)
	}

	// An observer's first pass is under way: no probe of readiness's own
	// until it is overdue.
	px = &invProxmox{}
	r = &readiness{cfg: cfg, log: zerolog.Nop(), px: &pxWatch{Proxmox: px, clock: clk}, observe: true, started: clk.Now()}
	r.refresh(ctx)
	if c := findCheck(r.checks(), "proxmox"); px.calls != 0 || c.OK {
		t.Fatalf("observer starting: %d calls, %+v", px.calls, c)
	}
	clk.Advance(30 * time.Second)
	r.refresh(ctx)
	if px.calls != 1 {
		t.Fatalf("observer silent for 30s: %d calls, want 1", px.calls)
	}
}

// A planner that has not caught up with the journal is not ready, saying
// so; once it has folded to the journal's end it is.
func TestPlannerCaughtUp(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	j := journaltest.New(16, clk.Now)
	caught := false
	r := &readiness{cfg: ReadyConfig{Clock: clk, Interval: time.Second, ProxmoxFresh: 30 * time.Second}, log: zerolog.Nop(),
		conns:   []probeConn{{name: "journal", subject: "pve.heartbeat.pve", connected: func() bool { return true }, j: j}},
		planner: func() bool { return caught }}
	r.refresh(context.Background())
	if c := findCheck(r.checks(), "planner"); c.OK || c.Reason != "still folding the journal" {
		t.Fatalf("folding: %+v", c)
	}
	caught = true
	if c := findCheck(r.checks(), "planner"); !c.OK {
		t.Fatalf("caught up: %+v", c)
	}
}
