package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
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
	"github.com/converge-pve/converge/planner"
)

// cliPipeline is every role of `converge up`, in process, on an embedded
// JetStream and the simulator, for CLI commands run against it.
type cliPipeline struct {
	url string
	rd  views.Reader
}

func startCLIPipeline(t *testing.T, guests int) *cliPipeline {
	t.Helper()
	clearEnv(t)
	t.Setenv("CONVERGE_DATA", t.TempDir()) // no credentials of an `up` nearby
	sim := pvesimtest.Start(t, pvesim.Options{Nodes: 3, Guests: guests})
	ctx, cancel := context.WithCancel(context.Background())
	cfg := app.DefaultConfig()
	cfg.Roles, cfg.Embedded = app.All, &natsserver.Options{DataDir: t.TempDir(), Listen: "127.0.0.1:-1"}
	cfg.Proxmox, cfg.Observer.Interval, cfg.Logger = pvesimtest.Client(t, sim), 200*time.Millisecond, zerolog.Nop()
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
	return &cliPipeline{url: a.Server().ClientURL(), rd: views.Reader{Store: vs, Cluster: events.DefaultCluster}}
}

// cli runs a converge command against the pipeline: its output and exit
// status.
func (p *cliPipeline) cli(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, err := run(t, append(args, "--nats", p.url)...)
	if err != nil {
		out += err.Error()
	}
	return out, codeOf(err)
}

// desireTags publishes, with desire -f, tags for each guest of ids (a
// config write each), and returns each guest's new desired revision.
func (p *cliPipeline) desireTags(t *testing.T, ids []int, tag string) map[int]uint64 {
	t.Helper()
	var b strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&b, "- {vmid: %d, tags: [%s]}\n", id, tag)
	}
	f := writeConfig(t, b.String())
	out, code := p.cli(t, "desire", "-f", f, "-o", "json")
	if code != 0 {
		t.Fatalf("desire -f: exit %d: %s", code, out)
	}
	var res []struct {
		VMID int    `json:"vmid"`
		Seq  uint64 `json:"seq"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res) != len(ids) {
		t.Fatalf("desire -f -o json: %v\n%s", err, out)
	}
	revs := map[int]uint64{}
	for _, r := range res {
		revs[r.VMID] = r.Seq
	}
	return revs
}

// release releases ids and waits until every one's document shows it
// (the planner folded it): the state the wait started from.
func (p *cliPipeline) release(t *testing.T, ids []int) {
	t.Helper()
	args := []string{"release"}
	for _, id := range ids {
		args = append(args, strconv.Itoa(id))
	}
	if out, code := p.cli(t, args...); code != 0 {
		t.Fatalf("release: exit %d: %s", code, out)
	}
	for _, id := range ids {
		if !pollUntil(30*time.Second, func() bool {
			d, err := p.rd.Guest(pvesimtest.Context(t), id)
			return err == nil && d != nil && d.Status.Kind == planner.Unmanaged && d.View.Released != nil
		}) {
			t.Fatalf("guest %d: release not folded within 30s", id)
		}
	}
}

// notConverged names the guests of revs whose documents do not show them
// converged at their revision (or a later one).
func (p *cliPipeline) notConverged(t *testing.T, revs map[int]uint64) []string {
	t.Helper()
	var out []string
	for id, rev := range revs {
		d, err := p.rd.Guest(pvesimtest.Context(t), id)
		switch {
		case err != nil:
			t.Fatal(err)
		case d == nil:
			out = append(out, fmt.Sprintf("%d: no document", id))
		case d.View.DesiredSeq < rev || d.Status.Kind != planner.Converged:
			out = append(out, fmt.Sprintf("%d: %s at revision %d, want converged at %d", id, d.Status.Kind, d.View.DesiredSeq, rev))
		}
	}
	return out
}

// pollUntil polls cond, a condition of the pipeline's roles (which run
// on the real clock), until it holds or limit passes.
func pollUntil(limit time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); {
		if cond() {
			return true
		}
		time.Sleep(20 * time.Millisecond) // polling a condition, not timing
	}
	return cond()
}

// Issue 35, defect 5: `wait --all` right after `desire -f` of guests just
// released waited for none of them (their views still said unmanaged)
// and exited 0 at once. It waits for every guest with desired state in
// the journal as it starts, and leaves out the guests released since.
// Each run releases 20 guests, desires them again and waits; a run whose
// wait exits 0 before all 20 are converged at their new revision is an
// early exit. WAIT_ALL_RUNS overrides the number of runs (20).
func TestWaitAllAfterDesireOfReleasedGuests(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every role against the simulator")
	}
	runs := 20
	if n, err := strconv.Atoi(os.Getenv("WAIT_ALL_RUNS")); err == nil && n > 0 {
		runs = n
	}
	const cycled = 20
	// Guests 100..119 are released and desired again each run, 120 and
	// 121 released for good, 122 never desired until the end.
	p := startCLIPipeline(t, cycled+3)
	var cycle, all []int
	for id := 100; id < 100+cycled+2; id++ {
		all = append(all, id)
		if id < 100+cycled {
			cycle = append(cycle, id)
		}
	}
	revs := p.desireTags(t, all, "r0")
	args := []string{"wait", "--timeout", "2m"}
	for _, id := range all {
		args = append(args, strconv.Itoa(id))
	}
	if out, code := p.cli(t, args...); code != 0 {
		t.Fatalf("first wait: exit %d: %s", code, out)
	}
	if bad := p.notConverged(t, revs); len(bad) > 0 {
		t.Fatalf("first wait exited 0 with: %v", bad)
	}
	p.release(t, all[cycled:])

	early := 0
	var took []time.Duration
	for i := 1; i <= runs; i++ {
		p.release(t, cycle)
		revs := p.desireTags(t, cycle, "r"+strconv.Itoa(i))
		began := time.Now()
		out, code := p.cli(t, "wait", "--all", "--timeout", "2m")
		took = append(took, time.Since(began).Round(time.Millisecond))
		bad := p.notConverged(t, revs)
		switch {
		case code != 0:
			t.Errorf("run %d: wait --all exit %d after %s: %s", i, code, took[i-1], out)
		case len(bad) > 0:
			early++
			t.Errorf("run %d: wait --all exited 0 after %s (%q) with %d of %d guests not converged: %v",
				i, took[i-1], strings.TrimSpace(out), len(bad), cycled, bad)
		case !strings.Contains(out, fmt.Sprintf("converged: %d guest(s)", cycled)) || !strings.Contains(out, "released, not waited for: 120 121"):
			t.Errorf("run %d: wait --all says %q, want %d converged and 120, 121 released", i, strings.TrimSpace(out), cycled)
		}
	}
	t.Logf("%d runs of wait --all after desire -f of %d just-released guests: %d early exits; wait took %v", runs, cycled, early, took)

	// A guest desired for the first time has no document at all yet.
	fresh := p.desireTags(t, []int{122}, "new")
	out, code := p.cli(t, "wait", "--all", "--timeout", "2m")
	if bad := p.notConverged(t, fresh); code != 0 || len(bad) > 0 || !strings.Contains(out, fmt.Sprintf("converged: %d guest(s)", cycled+1)) {
		t.Errorf("wait --all after desire of a new guest: exit %d %q; %v", code, strings.TrimSpace(out), bad)
	}
}
