package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/natsauth"
	"github.com/converge-pve/converge/internal/natsserver"
	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
	"github.com/converge-pve/converge/projector"
)

// desire --set NAME --prune as the publisher NATS user is refused before
// anything is published (nothing journalled); the api user publishes the
// set.
func TestDesirePruneNeedsControlUser(t *testing.T) {
	clearEnv(t)
	creds, _, err := natsauth.LoadOrCreate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := natsserver.Start(natsserver.Options{DataDir: t.TempDir(), Listen: "127.0.0.1:-1", Users: creds.Users(natsauth.Names{})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	as := func(r natsauth.Role, args ...string) (string, error) {
		t.Setenv("CONVERGE_NATS_PASSWORD", creds[r])
		return run(t, append([]string{"--nats", srv.ClientURL(), "--nats-user", string(r)}, args...)...)
	}
	if out, err := as(natsauth.Admin, "provision"); err != nil {
		t.Fatalf("provision: %v\n%s", err, out)
	}
	file := writeConfig(t, "- {vmid: 101, power: running}\n- {vmid: 102, power: stopped}\n")
	stored := func() uint64 {
		t.Helper()
		info, err := srv.Jsz(nil)
		if err != nil {
			t.Fatal(err)
		}
		return info.Messages
	}
	before := stored()
	out, err := as(natsauth.Publisher, "desire", "-f", file, "--set", "web", "--prune")
	if err == nil || !strings.Contains(err.Error(), "may not publish") || !strings.Contains(err.Error(), "nothing was published") {
		t.Fatalf("publisher's --prune: %v\n%s", err, out)
	}
	if after := stored(); after != before {
		t.Fatalf("a refused --prune stored %d messages", after-before)
	}
	// api may release; with no planner's views to read the set's members
	// from, --prune is refused before anything is published, and the
	// file without --prune is published.
	out, err = as(natsauth.API, "desire", "-f", file, "--set", "web", "--prune")
	if err == nil || !strings.Contains(err.Error(), "no planner has written views") || stored() != before {
		t.Fatalf("api's --prune without views: %v\n%s", err, out)
	}
	out, err = as(natsauth.API, "desire", "-f", file, "--set", "web")
	if err != nil || !strings.Contains(out, "journalled in set web") {
		t.Fatalf("api's --set: %v\n%s", err, out)
	}
}

// --prune reads the set's members from the planner's views only once they
// reflect the journal: views behind it (a guest just moved to another
// set) refuse the prune with nothing published; caught up, it releases.
func TestPruneWaitsForCurrentViews(t *testing.T) {
	viewsStale = 300 * time.Millisecond
	t.Cleanup(func() { viewsStale = 15 * time.Second })
	c := startCLIBus(t)
	d102 := c.desire(t, 102, "--cores", "1")
	cores := 1
	c.put(t, &views.GuestDoc{View: &projector.View{VMID: 102, Cluster: "pve", DesiredSeq: d102,
		Desired: &events.Desired{VMID: 102, Cores: &cores, Set: "web"}}, Status: planner.Status{Kind: planner.Converged}})
	c.putCluster(t, &views.ClusterDoc{State: projector.ClusterState{Cluster: "pve"}, Seq: 0})
	file := writeConfig(t, "- {vmid: 101, cores: 1}\n")
	st, err := c.b.Stream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	msgs := func() uint64 {
		info, err := st.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}
	before := msgs()
	if out, code := c.cli(t, "desire", "-f", file, "--set", "web", "--prune"); code == 0 || !strings.Contains(out, "behind the journal") || msgs() != before {
		t.Fatalf("--prune on views behind the journal: exit %d, %d messages stored:\n%s", code, msgs()-before, out)
	}
	c.putCluster(t, &views.ClusterDoc{State: projector.ClusterState{Cluster: "pve"}, Seq: 1 << 40})
	if out, code := c.cli(t, "desire", "-f", file, "--set", "web", "--prune"); code != 0 || !strings.Contains(out, "released 102") {
		t.Fatalf("--prune on current views: exit %d:\n%s", code, out)
	}
}
