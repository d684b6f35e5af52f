package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/app"
	"github.com/converge-pve/converge/internal/natsserver"
	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/internal/pvesim/pvesimtest"
	"github.com/converge-pve/converge/internal/views"
)

// TestStatusShowsGuestAgentAddresses: every role of `converge up` in
// process, on an embedded JetStream and the simulator over real HTTP. The
// observer asks the agent of a running VM that enables it (the simulator
// answers as qemu-server does, from the VM's cloud-init addresses), and
// its addresses reach the guest's document: GET /v1/guests/{vmid} carries
// them (without loopback and link-local ones), `converge status VMID`
// shows them below the table, and `converge history VMID` lists them. A
// VM without the agent has none.
func TestStatusShowsGuestAgentAddresses(t *testing.T) {
	clearEnv(t)
	t.Setenv("CONVERGE_DATA", t.TempDir())
	sim := pvesimtest.Start(t, pvesim.Options{Nodes: 1})
	for _, g := range []pvesim.GuestSpec{
		{VMID: 601, Running: true, Name: "web", Config: map[string]string{"agent": "1",
			"net0": "virtio=BC:24:11:00:06:01,bridge=vmbr0", "ipconfig0": "ip=192.0.2.61/24,gw=192.0.2.1,ip6=fd00::61/64"}},
		{VMID: 602, Running: true, Name: "plain", Config: map[string]string{"net0": "virtio=BC:24:11:00:06:02,bridge=vmbr0"}},
	} {
		if err := sim.AddGuest(g); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	cfg := app.DefaultConfig()
	cfg.Roles, cfg.Embedded = app.All, &natsserver.Options{DataDir: t.TempDir(), Listen: "127.0.0.1:-1"}
	cfg.Proxmox, cfg.Observer.Interval, cfg.Logger = pvesimtest.Client(t, sim), 200*time.Millisecond, zerolog.Nop()
	cfg.HTTP, cfg.HTTPAuth.Guard.NoAuth = "127.0.0.1:0", true
	a, err := app.Start(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = a.Wait() })
	vs, err := a.Bus().ViewStore()
	if err != nil {
		t.Fatal(err)
	}
	docs, err := views.Reader{Store: vs, Cluster: events.DefaultCluster}.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for d := range docs { // the current documents, then each one written
		if d.View != nil && (d.View.VMID == 602 || d.View.Addresses != nil) {
			seen[d.View.VMID] = true
		}
		if seen[601] && seen[602] {
			break
		}
	}
	if ctx.Err() != nil {
		t.Fatal("no document of guest 601 with addresses")
	}

	get := func(path string) views.Summary {
		t.Helper()
		res, err := http.Get("http://" + a.HTTPAddr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var s views.Summary
		if err := json.NewDecoder(res.Body).Decode(&s); err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s %v", path, res.Status, err)
		}
		return s
	}
	s := get("/v1/guests/601")
	want := []events.GuestAddress{
		{Interface: "eth0", Address: "192.0.2.61", Prefix: 24, MAC: "bc:24:11:00:06:01"},
		{Interface: "eth0", Address: "fd00::61", Prefix: 64, MAC: "bc:24:11:00:06:01"},
	}
	if ad := s.Addresses; ad == nil || !ad.Known || len(ad.Addresses) != 2 || ad.Addresses[0] != want[0] || ad.Addresses[1] != want[1] || ad.Seq == 0 {
		t.Fatalf("GET /v1/guests/601: addresses %+v", s.Addresses)
	}
	if s := get("/v1/guests/602"); s.Addresses != nil {
		t.Fatalf("GET /v1/guests/602 (no agent): addresses %+v", s.Addresses)
	}

	out, err := run(t, "status", "601", "602", "--nats", a.Server().ClientURL())
	if err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	var line string
	for l := range strings.Lines(out) {
		if strings.HasPrefix(l, "601 guest agent addresses") {
			line = l
		}
		if strings.HasPrefix(l, "602 guest agent") {
			t.Fatalf("status shows addresses of a guest without the agent:\n%s", out)
		}
	}
	if !strings.HasSuffix(line, "): eth0 192.0.2.61/24, eth0 fd00::61/64\n") {
		t.Fatalf("status 601 601:\n%s", out)
	}
	out, err = run(t, "history", "601", "--nats", a.Server().ClientURL())
	if err != nil || !strings.Contains(out, "guest agent addresses: eth0 192.0.2.61/24, eth0 fd00::61/64") {
		t.Fatalf("history: %v\n%s", err, out)
	}
}

// The detail line of status: known addresses, none, unknown with the
// reason; nothing without a report.
func TestAddressesLine(t *testing.T) {
	now := time.Date(2026, 11, 27, 6, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		a    *views.AddressesSummary
		want string
	}{
		{nil, ""},
		{&views.AddressesSummary{Known: true, ReadAt: now.Add(-5 * time.Second),
			Addresses: []events.GuestAddress{{Interface: "eth0", Address: "192.0.2.5", Prefix: 24}, {Interface: "eth1", Address: "fd00::5", Prefix: 64}}},
			"guest agent addresses (read 5s ago): eth0 192.0.2.5/24, eth1 fd00::5/64"},
		{&views.AddressesSummary{Known: true, ReadAt: now}, "guest agent addresses (read now): none"},
		{&views.AddressesSummary{Reason: "QEMU guest agent is not running", ReadAt: now.Add(-2 * time.Minute)},
			"guest agent addresses unknown (QEMU guest agent is not running; 2m ago)"},
	} {
		if got := addressesLine(c.a, now); got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
	}
}
