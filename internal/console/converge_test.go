package console_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/api"
	"github.com/converge-pve/converge/internal/app"
	"github.com/converge-pve/converge/internal/natsserver"
	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/internal/pvesim/pvesimtest"
	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
)

// The console against a real converge: every role in-process with an
// embedded NATS, the simulator over HTTP with 50 guests, and the HTTP API
// with a write and a read token. The mass-change guard lets one shutdown
// through per hour, so every later stop is held until approved.
func TestConsoleAgainstConverge(t *testing.T) {
	chromium(t) // skipped (or failed under CI) before anything starts
	const write, read = "ops-0123456789abcdef", "viewer-0123456789abcd"
	tokens, err := api.ParseTokens("test", []byte("tokens:\n  - {name: ops, scope: write, token: "+write+"}\n  - {name: viewer, scope: read, token: "+read+"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	sim := pvesimtest.Start(t, pvesim.Options{Nodes: 3, Guests: 50})
	ctx, cancel := context.WithCancel(context.Background())
	cfg := app.DefaultConfig()
	cfg.Roles, cfg.Embedded = app.All, &natsserver.Options{DataDir: t.TempDir(), Listen: "127.0.0.1:-1"}
	cfg.Proxmox, cfg.HTTP, cfg.Logger = pvesimtest.Client(t, sim), "127.0.0.1:0", zerolog.Nop()
	cfg.HTTPAuth.Guard.Tokens = tokens
	cfg.Observer.Interval = 2 * time.Second
	cfg.FollowObserveInterval()
	l := &cfg.Planner.Planner.Limits
	l.GuardMin, l.GuardShare, l.GuardWindow = 1, 0.001, time.Hour
	a, err := app.Start(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = a.Wait() })
	base := "http://" + a.HTTPAddr()
	vs, err := a.Bus().ViewStore()
	if err != nil {
		t.Fatal(err)
	}
	rd := views.Reader{Store: vs, Cluster: events.DefaultCluster}
	tctx := pvesimtest.Context(t)

	waitDoc := func(t *testing.T, what string, vmid int, ok func(*views.GuestDoc) bool) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); ; {
			d, err := rd.Guest(tctx, vmid)
			if err == nil && d != nil && ok(d) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("guest %d never %s", vmid, what)
			}
			time.Sleep(20 * time.Millisecond) // polling a condition, not timing
		}
	}
	stopped := func(t *testing.T, vmid int) {
		t.Helper()
		waitDoc(t, "converged and stopped", vmid, func(d *views.GuestDoc) bool {
			return d.Status.Kind == planner.Converged && d.View.Observed != nil && d.View.Observed.Status == "stopped"
		})
	}
	desire := func(t *testing.T, vmid int, body string) {
		t.Helper()
		post(t, base+"/v1/desired/"+strconv.Itoa(vmid), write, body)
	}

	// Every guest observed before the browser looks.
	inv, err := pvesimtest.Client(t, sim).Inventory(tctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(inv) != 50 {
		t.Fatalf("the simulator has %d guests, want 50", len(inv))
	}
	var running []int
	for _, r := range inv {
		waitDoc(t, "observed", r.VMID, func(d *views.GuestDoc) bool { return d.View.Observed != nil })
		if r.Kind == pve.KindQEMU && !r.Template && r.Status == "running" {
			running = append(running, r.VMID)
		}
	}
	slices.Sort(running)
	// The lowest VMID is the scenario's live guest; the stops take others.
	running = slices.DeleteFunc(running, func(v int) bool { return v == minVMID(inv) })
	if len(running) < 5 {
		t.Fatalf("the simulator runs %d VMs; the test needs 5", len(running))
	}
	// The guard's one shutdown of the hour, spent.
	desire(t, running[0], `{"vmid":`+strconv.Itoa(running[0])+`,"power":"stopped"}`)
	stopped(t, running[0])
	next := 0
	scenario(t, target{url: base, write: write, read: read, guests: len(inv), desire: desire, stopped: stopped, shots: true,
		hold: func(t *testing.T) int {
			t.Helper()
			next++
			vmid := running[next]
			desire(t, vmid, `{"vmid":`+strconv.Itoa(vmid)+`,"power":"stopped"}`)
			waitDoc(t, "held", vmid, func(d *views.GuestDoc) bool { return d.Status.Kind == planner.Held })
			return vmid
		}})
}

func minVMID(inv []pve.Resource) int {
	m := inv[0].VMID
	for _, r := range inv {
		m = min(m, r.VMID)
	}
	return m
}
