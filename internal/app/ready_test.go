package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/executor"
	"github.com/converge-pve/converge/internal/api"
	"github.com/converge-pve/converge/internal/app"
	"github.com/converge-pve/converge/internal/clock/clocktest"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/natsserver"
	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/internal/pvesim/pvesimtest"
)

// startReady runs roles on an embedded NATS with the HTTP API on a
// loopback port. The readiness probes run on a fake clock that the test
// never advances: they run once at start, and whenever the test calls
// CheckReady.
func startReady(t *testing.T, roles app.Roles, px app.Proxmox) *app.App {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cfg := app.DefaultConfig()
	cfg.Roles, cfg.Embedded = roles, &natsserver.Options{DataDir: t.TempDir(), Listen: "127.0.0.1:-1"}
	cfg.Proxmox, cfg.HTTP, cfg.Logger = px, "127.0.0.1:0", zerolog.Nop()
	cfg.Ready.Clock = clocktest.New(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	a, err := app.Start(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = a.Wait() })
	return a
}

func readyz(t *testing.T, a *app.App) (int, api.Readiness) {
	t.Helper()
	req, err := http.NewRequestWithContext(pvesimtest.Context(t), "GET", "http://"+a.HTTPAddr()+"/readyz", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var r api.Readiness
	if err := json.NewDecoder(res.Body).Decode(&r); err != nil {
		t.Fatalf("/readyz body: %v", err)
	}
	return res.StatusCode, r
}

func check(r api.Readiness, name string) (api.Check, bool) {
	for _, c := range r.Checks {
		if c.Name == name {
			return c, true
		}
	}
	return api.Check{}, false
}

// waitReady probes and asks /readyz until it answers 200: the planner
// folds the journal and the observer passes once, in the background.
func waitReady(t *testing.T, a *app.App) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		a.CheckReady(pvesimtest.Context(t))
		code, r := readyz(t, a)
		if code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready after 30s: %d %+v", code, r)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition, not timing
	}
}

// /readyz said ready while JetStream refused every write: it looked only at
// the NATS connection. It probes the journal now.
func TestReadyzJournalUnwritable(t *testing.T) {
	sim := pvesimtest.Start(t, pvesim.Options{Guests: 2})
	a := startReady(t, app.All, pvesimtest.Client(t, sim))
	waitReady(t, a)
	code, r := readyz(t, a)
	for _, name := range []string{"journal", "planner", "proxmox"} {
		if c, ok := check(r, name); !ok || !c.OK {
			t.Fatalf("ready (%d) without a passing %q check: %+v", code, name, r)
		}
	}

	// Seal the stream: the server refuses every publish; the connection
	// stays up. First let the executor create its partitions' consumers:
	// nats-server (2.15.2) races updating a stream's config against
	// creating a consumer on it (found by -race).
	ctx := pvesimtest.Context(t)
	s, err := a.Bus().Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Each partition's consumer by name: a count of the stream's
	// consumers also counts the planner's ordered one, and reached 16
	// while the last partition's was still being created (the race, seen
	// once in three make test runs beside another).
	for p := range executor.DefaultPartitions {
		for {
			if _, err := s.Consumer(ctx, journal.PartitionConsumer(journal.ExecutorGroup("pve"), p)); err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond) // polling a condition, not timing
		}
	}
	sc := s.CachedInfo().Config
	sc.Sealed = true
	if _, err := a.Bus().JS.UpdateStream(ctx, sc); err != nil {
		t.Fatal(err)
	}
	a.CheckReady(ctx)
	if !a.Bus().NC.IsConnected() {
		t.Fatal("the test wanted NATS connected")
	}
	code, r = readyz(t, a)
	t.Logf("/readyz %d: %s", code, r.Reason)
	c, ok := check(r, "journal")
	if code != http.StatusServiceUnavailable || r.Status != "not ready" || !ok || c.OK || !strings.Contains(c.Reason, "sealed") {
		t.Fatalf("journal sealed, NATS connected: %d %+v", code, r)
	}
	for _, role := range []string{"observer", "planner", "executor"} {
		if c, ok := check(r, "journal:"+role); !ok || c.OK {
			t.Errorf("the %s's connection's journal check: %+v (found %t)", role, c, ok)
		}
	}
}

// /readyz said ready while Proxmox refused converge's credentials.
func TestReadyzProxmoxUnauthorized(t *testing.T) {
	sim := pvesimtest.Start(t, pvesim.Options{Guests: 2})
	pc := pve.DefaultConfig()
	pc.URL, pc.TokenID, pc.TokenSecret, pc.Timeout = sim.URL(), pvesimtest.TokenID, "not-the-secret", 10*time.Second
	wrong, err := pve.New(pc)
	if err != nil {
		t.Fatal(err)
	}
	unauthorized := func(t *testing.T, code int, r api.Readiness) bool {
		t.Helper()
		c, ok := check(r, "proxmox")
		return code == http.StatusServiceUnavailable && ok && !c.OK && strings.Contains(c.Reason, "credentials")
	}

	// An executor alone: nothing of its own tells whether Proxmox answers;
	// the readiness probe asks (at a bounded rate).
	t.Run("executor", func(t *testing.T) {
		a := startReady(t, app.Roles{Executor: true}, wrong)
		a.CheckReady(pvesimtest.Context(t))
		if code, r := readyz(t, a); !unauthorized(t, code, r) {
			t.Fatalf("Proxmox answers 401: %d %+v", code, r)
		}
	})
	// An observer: its passes tell.
	t.Run("observer", func(t *testing.T) {
		a := startReady(t, app.Roles{Observer: true}, wrong)
		deadline := time.Now().Add(30 * time.Second)
		for {
			code, r := readyz(t, a)
			if unauthorized(t, code, r) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("Proxmox answers 401: %d %+v", code, r)
			}
			time.Sleep(20 * time.Millisecond) // polling a condition, not timing
		}
	})
}

// /readyz costs no Proxmox call: it reports what the probes found.
func TestReadyzCallsNoProxmox(t *testing.T) {
	sim := pvesimtest.Start(t, pvesim.Options{Guests: 2})
	px := pvesimtest.Client(t, sim)
	a := startReady(t, app.Roles{Executor: true}, px)
	a.CheckReady(pvesimtest.Context(t))
	before := px.Calls()
	for range 20 {
		if code, r := readyz(t, a); code != http.StatusOK {
			t.Fatalf("executor, Proxmox good: %d %+v", code, r)
		}
	}
	if n := px.Calls() - before; n != 0 {
		t.Fatalf("20 /readyz requests cost %d Proxmox calls", n)
	}
}
