package main

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/bus/bustest"
	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
	"github.com/converge-pve/converge/projector"
)

// cliBus is an embedded NATS with a provisioned journal and views bucket
// and no planner: the test writes the documents the commands read.
type cliBus struct {
	b   *bus.Bus
	url string
}

func startCLIBus(t *testing.T) *cliBus {
	t.Helper()
	clearEnv(t)
	t.Setenv("CONVERGE_DATA", t.TempDir()) // no credentials of an `up` nearby
	b := bustest.New(t)
	return &cliBus{b: b, url: bustest.Server(t, b).ClientURL()}
}

func (c *cliBus) cli(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, err := run(t, append(args, "--nats", c.url)...)
	if err != nil {
		out += err.Error()
	}
	return out, codeOf(err)
}

// desire publishes a desired state with the CLI and returns its revision.
func (c *cliBus) desire(t *testing.T, vmid int, flags ...string) uint64 {
	t.Helper()
	out, code := c.cli(t, append([]string{"desire", strconv.Itoa(vmid), "-o", "json"}, flags...)...)
	var res []struct{ Seq uint64 }
	if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil || len(res) != 1 {
		t.Fatalf("desire %d: exit %d %v: %s", vmid, code, err, out)
	}
	return res[0].Seq
}

// put writes a guest's document, as a planner would.
func (c *cliBus) put(t *testing.T, d *views.GuestDoc) {
	t.Helper()
	vs, err := c.b.ViewStore()
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	f, err := vs.PutAsync(views.GuestKey(events.DefaultCluster, d.View.VMID), body)
	if err == nil {
		_, err = f.Wait(context.Background())
	}
	if err != nil {
		t.Fatal(err)
	}
}

// Issue 35, point 10, through the command: wait on a released guest
// exits 2 at once, on a held one 5 at once, naming the condition; wait
// --all leaves the released guest out. Each wait has a minute: exiting
// 3 would be waiting it out.
func TestWaitCommandReleasedAndHeld(t *testing.T) {
	c := startCLIBus(t)
	d101 := c.desire(t, 101, "--cores", "2")
	d102 := c.desire(t, 102, "--power", "stopped")
	out, code := c.cli(t, "release", "101", "-o", "json")
	var rel struct{ Seq uint64 }
	if err := json.Unmarshal([]byte(out), &rel); code != 0 || err != nil {
		t.Fatalf("release: exit %d %v: %s", code, err, out)
	}
	c.put(t, &views.GuestDoc{View: &projector.View{VMID: 101, DesiredSeq: d101, Seq: rel.Seq,
		Released: &projector.Mark{Seq: rel.Seq, By: "converge-cli:test", At: time.Now()}},
		Status: planner.Status{Kind: planner.Unmanaged, Reason: "no desired state: converge leaves this guest alone"}})
	power := events.Power("stopped")
	c.put(t, &views.GuestDoc{View: &projector.View{VMID: 102, DesiredSeq: d102, Seq: d102, Desired: &events.Desired{VMID: 102, Power: &power}},
		Status: planner.Status{Kind: planner.Held, Reason: "mass-change guard: 9 guests already shut down …; shutdown waits for approval (converge approve 102, or --all)"}})
	// The planner has folded the journal: wait may trust these documents.
	c.putCluster(t, &views.ClusterDoc{State: projector.ClusterState{Cluster: "pve"}, Seq: rel.Seq + 1000})

	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"wait", "101"}, exitUsage, "guest 101 was released"},
		{[]string{"wait", "102"}, exitNeedsOperator, "held by the mass-change guard (`converge approve VMID`, or --all): 102"},
		{[]string{"wait", "--all"}, exitNeedsOperator, "1 guest(s) wait for an operator"},
	} {
		began := time.Now()
		out, code := c.cli(t, append(tc.args, "--timeout", "1m")...)
		if code != tc.code || !strings.Contains(out, tc.says) {
			t.Errorf("%v: exit %d after %s, want %d saying %q:\n%s", tc.args, code, time.Since(began), tc.code, tc.says, out)
		}
		if tc.args[1] == "--all" && strings.Contains(out, "101") {
			t.Errorf("wait --all names the released guest:\n%s", out)
		}
	}
}

// wait --all takes from the documents a guest whose desired events the
// journal no longer holds (retention dropped its start; the keep stream
// has them), and says so when there is nothing at all to wait for.
func TestWaitAllGuestsBeyondRetention(t *testing.T) {
	c := startCLIBus(t)
	if out, code := c.cli(t, "wait", "--all", "--timeout", "1m"); code != 0 || !strings.Contains(out, "no managed guests: nothing to wait for") {
		t.Fatalf("an empty journal: exit %d: %s", code, out)
	}
	d101 := c.desire(t, 101, "--cores", "2")
	d102 := c.desire(t, 102, "--cores", "2")
	s, err := c.b.Stream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// What retention does to the oldest events.
	if err := s.Purge(context.Background(), jetstream.WithPurgeSequence(d102)); err != nil {
		t.Fatal(err)
	}
	cores := 2
	for id, rev := range map[int]uint64{101: d101, 102: d102} {
		c.put(t, &views.GuestDoc{View: &projector.View{VMID: id, DesiredSeq: rev, Seq: rev, Desired: &events.Desired{VMID: id, Cores: &cores}},
			Status: planner.Status{Kind: planner.Converged}})
	}
	if out, code := c.cli(t, "wait", "--all", "--timeout", "1m", "-o", "json"); code != 0 || !strings.Contains(out, `"converged":[101,102]`) {
		t.Fatalf("exit %d: %s", code, out)
	}
}
