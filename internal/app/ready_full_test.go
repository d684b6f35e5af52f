package app_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/app"
	"github.com/converge-pve/converge/internal/clock/clocktest"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/natsserver"
	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/internal/pvesim/pvesimtest"
)

// /readyz said ready while JetStream was full: its probe, a fenced
// publish, is answered "wrong last sequence" before the server looks at
// its storage. A write refused for storage now makes the journal check
// fail, naming it, until a write is stored again. Proxmox unreachable
// fails the proxmox check, and both come back.
func TestReadyzJournalFullAndProxmoxUnreachable(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "small.conf")
	if err := os.WriteFile(conf, []byte("jetstream { max_file_store: 4MB }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sim := pvesimtest.Start(t, pvesim.Options{Guests: 2})
	clk := clocktest.New(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	ctx, cancel := context.WithCancel(context.Background())
	cfg := app.DefaultConfig()
	cfg.Roles, cfg.Embedded = app.All, &natsserver.Options{DataDir: filepath.Join(dir, "js"), Listen: "127.0.0.1:-1", ConfigFile: conf}
	cfg.Proxmox, cfg.HTTP, cfg.Ready.Clock, cfg.Logger = pvesimtest.Client(t, sim), "127.0.0.1:0", clk, zerolog.Nop()
	a, err := app.Start(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = a.Wait() })
	waitReady(t, a)

	// Proxmox unreachable, then back.
	tctx := pvesimtest.Context(t)
	if err := sim.SetFaults(pvesim.Faults{UnreachableUntil: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour) // the last inventory answer is old: readiness asks Proxmox itself
	a.CheckReady(tctx)
	code, r := readyz(t, a)
	if c, _ := check(r, "proxmox"); code != http.StatusServiceUnavailable || c.OK || !strings.Contains(c.Reason, "unreachable") {
		t.Fatalf("Proxmox unreachable: %d %+v", code, r)
	}
	// The executors' reachability follows the process's inventory calls,
	// though no action runs (it stayed 1 through an outage).
	if v := scrapeGauge(t, a, `converge_pve_reachable{role="executor"}`); v != 0 {
		t.Fatalf(`converge_pve_reachable{role="executor"} = %v while Proxmox is unreachable`, v)
	}
	if err := sim.SetFaults(pvesim.Faults{}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	waitReady(t, a)
	if v := scrapeGauge(t, a, `converge_pve_reachable{role="executor"}`); v != 1 {
		t.Fatalf(`converge_pve_reachable{role="executor"} = %v once Proxmox is back`, v)
	}

	// Fill JetStream through the process's own connection.
	body := []byte(fmt.Sprintf(`{"vmid":101,"description":%q}`, strings.Repeat("x", 60000)))
	var refused error
	for i := 0; i < 200 && refused == nil; i++ {
		_, refused = a.Bus().Append(tctx, events.Message{Subject: events.Subject(events.KindDesired, events.DefaultCluster, 101), Data: body}, journal.Expect{})
	}
	if refused == nil {
		t.Fatal("JetStream never filled up")
	}
	a.CheckReady(tctx)
	code, r = readyz(t, a)
	if c, _ := check(r, "journal"); code != http.StatusServiceUnavailable || c.OK || !strings.Contains(c.Reason, "the journal is full") {
		t.Fatalf("journal full (%v): %d %+v", refused, code, r)
	}
}

// scrapeGauge reads one series' value from the process's /metrics (-1
// when it is not there).
func scrapeGauge(t *testing.T, a *app.App, series string) float64 {
	t.Helper()
	res, err := http.Get("http://" + a.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	return -1
}
