package app_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/app"
	"github.com/converge-pve/converge/internal/audit"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/internal/pvesim/pvesimtest"
	"github.com/converge-pve/converge/internal/revise"
	"github.com/converge-pve/converge/planner"
	"github.com/converge-pve/converge/projector"
)

// rollback publishes the rollback of vmid to revision to, as `converge
// rollback VMID --to` does, and returns it and its sequence.
func (p *pipeline) rollback(t *testing.T, vmid int, to uint64) (*revise.Rollback, uint64) {
	t.Helper()
	ctx := pvesimtest.Context(t)
	doc := p.caughtUp(t, vmid, nil)
	rb, err := revise.PlanRollback(ctx, p.a.Bus(), events.DefaultCluster, vmid, to,
		revise.Current{Desired: doc.View.Desired, Seq: doc.View.DesiredSeq}, doc.View.Observed)
	if err != nil {
		t.Fatal(err)
	}
	m, err := rb.Message(events.DefaultCluster, "converge-cli:ops", "")
	if err != nil {
		t.Fatal(err)
	}
	ack, err := p.a.Bus().Append(ctx, m, journal.Expect{})
	if err != nil {
		t.Fatal(err)
	}
	return rb, ack.Seq
}

// A rollback of a config change (cores) and of a node move restores the
// Proxmox state of the revision rolled back to: the guest returns to its
// node with its cores, the disk grown since keeps its size (disks never
// shrink, and the rollback says so), and the journal says who asked and
// from which revision. --to-time finds the same revision.
func TestRollbackRestoresRevision(t *testing.T) {
	p := startPipeline(t, pvesim.Options{Nodes: 2}, verifyEveryPass)
	const vmid = 601
	if err := p.sim.AddGuest(pvesim.GuestSpec{VMID: vmid, Node: "pve1",
		Config: map[string]string{"cores": "1", "scsi0": "local-lvm:vm-601-disk-0,size=4G"}}); err != nil {
		t.Fatal(err)
	}
	p.pass(t)
	stopped, pve1, pve2 := events.PowerStopped, "pve1", "pve2"
	two, four := 2, 4
	rev1 := p.desire(t, &events.Desired{VMID: vmid, Power: &stopped, Cores: &two, Node: &pve1,
		Disks: map[string]events.DiskWant{"scsi0": {SizeGiB: 4}}})
	p.quiet(t, vmid, rev1)
	rev2 := p.desire(t, &events.Desired{VMID: vmid, Power: &stopped, Cores: &four, Node: &pve2,
		Disks: map[string]events.DiskWant{"scsi0": {SizeGiB: 8}}})
	p.quiet(t, vmid, rev2)
	if g, _ := p.sim.Guest(vmid); g.Node != "pve2" || g.Config["cores"] != "4" {
		t.Fatalf("revision %d not applied: node %s cores %s", rev2, g.Node, g.Config["cores"])
	}

	// --to-time: the revision in force when rev1 was stored is rev1.
	ctx := pvesimtest.Context(t)
	e1, err := p.a.Bus().Get(ctx, rev1)
	if err != nil || e1 == nil {
		t.Fatalf("revision %d: %v", rev1, err)
	}
	if at, err := revise.RevisionAt(ctx, p.a.Bus(), events.DefaultCluster, vmid, e1.Time); err != nil || at != rev1 {
		t.Fatalf("revision at %s: #%d, %v; want #%d", e1.Time, at, err, rev1)
	}

	rb, seq := p.rollback(t, vmid, rev1)
	if rb.From != rev2 || rb.To != rev1 || rb.Desired.Disks["scsi0"].SizeGiB != 8 ||
		len(rb.Notes) != 1 || !strings.Contains(rb.Notes[0], "never shrink") {
		t.Fatalf("rollback %+v (notes %q): want from %d to %d, scsi0 kept at 8 GiB and said so", rb, rb.Notes, rev2, rev1)
	}
	p.quiet(t, vmid, seq)
	g, _ := p.sim.Guest(vmid)
	if g.Node != "pve1" || g.Config["cores"] != "2" || g.Status != "stopped" || !strings.Contains(g.Config["scsi0"], "size=8G") {
		t.Fatalf("after the rollback: node %s cores %s status %s scsi0 %s; want revision %d's pve1, 2 cores, stopped, 8G kept",
			g.Node, g.Config["cores"], g.Status, g.Config["scsi0"], rev1)
	}
	e, err := p.a.Bus().Get(ctx, seq)
	if err != nil || e == nil {
		t.Fatalf("rollback #%d: %v", seq, err)
	}
	if e.Header.Get(revise.HeaderRollbackTo) != strconv.FormatUint(rev1, 10) ||
		e.Header.Get(revise.HeaderRollbackFrom) != strconv.FormatUint(rev2, 10) ||
		e.Header.Get(events.HeaderPublisher) != "converge-cli:ops" {
		t.Fatalf("rollback journalled with headers %v", e.Header)
	}

	// history lists the revisions by number and shows the rollback.
	es, err := audit.Timeline(ctx, p.a.Bus().JS, "PVE", events.DefaultCluster, vmid, 0, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var revs []uint64
	var shown string
	for _, e := range es {
		if e.Kind == events.KindDesired {
			revs = append(revs, e.Seq)
			if e.Seq == seq {
				shown = e.Summary
			}
		}
	}
	if !slices.Equal(revs, []uint64{rev1, rev2, seq}) || !strings.HasPrefix(shown, fmt.Sprintf("rollback to revision %d (from %d)", rev1, rev2)) {
		t.Fatalf("history's desired revisions %v, the rollback %q", revs, shown)
	}

	// Rolling back the rollback (to rev2) moves it again: a rollback is a
	// revision like any other.
	_, back := p.rollback(t, vmid, rev2)
	p.quiet(t, vmid, back)
	if g, _ := p.sim.Guest(vmid); g.Node != "pve2" || g.Config["cores"] != "4" {
		t.Fatalf("rollback to %d: node %s cores %s", rev2, g.Node, g.Config["cores"])
	}
}

// With signing required, a rollback is a desired event like any other: an
// unsigned one is rejected and changes nothing; one signed by the
// caller's key restores the revision.
func TestSignedRollback(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	auth := &projector.Auth{Keys: map[string]ed25519.PublicKey{"ops": pub}, Require: true}
	p := startPipeline(t, pvesim.Options{Nodes: 1}, verifyOff, func(c *app.Config) {
		c.Planner.Planner.Auth, c.Executor.Auth = auth, auth
	})
	const vmid = 611
	if err := p.sim.AddGuest(pvesim.GuestSpec{VMID: vmid, Node: "pve1", Config: map[string]string{"cores": "1"}}); err != nil {
		t.Fatal(err)
	}
	p.pass(t)
	ctx := pvesimtest.Context(t)
	publish := func(m events.Message, sign bool) uint64 {
		t.Helper()
		if sign {
			if err := events.SignMessage(&m, priv, "ops", time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		ack, err := p.a.Bus().Append(ctx, m, journal.Expect{})
		if err != nil {
			t.Fatal(err)
		}
		return ack.Seq
	}
	desire := func(cores int) uint64 {
		t.Helper()
		stopped := events.PowerStopped
		m, err := events.DesiredMessage(&events.Desired{VMID: vmid, Power: &stopped, Cores: &cores}, events.PublishOptions{Publisher: "ops"})
		if err != nil {
			t.Fatal(err)
		}
		return publish(m, true)
	}
	rev1 := desire(2)
	p.converge(t, vmid, rev1)
	rev2 := desire(4)
	p.converge(t, vmid, rev2)
	plan := func() events.Message {
		t.Helper()
		doc := p.caughtUp(t, vmid, nil)
		rb, err := revise.PlanRollback(ctx, p.a.Bus(), events.DefaultCluster, vmid, rev1,
			revise.Current{Desired: doc.View.Desired, Seq: doc.View.DesiredSeq}, doc.View.Observed)
		if err != nil {
			t.Fatal(err)
		}
		m, err := rb.Message(events.DefaultCluster, "ops", "")
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	before := p.sim.Mutations()
	unsigned := publish(plan(), false)
	if doc := p.waitState(t, vmid, unsigned, planner.Rejected, 20*time.Second); doc == nil || !strings.Contains(doc.Status.Reason, "unsigned") {
		t.Fatalf("an unsigned rollback: %+v", doc)
	}
	p.settleIn(t, vmid)
	if n := p.sim.Mutations() - before; n != 0 {
		t.Fatalf("an unsigned rollback made %d Proxmox mutations", n)
	}
	signed := publish(plan(), true)
	p.converge(t, vmid, signed)
	if g, _ := p.sim.Guest(vmid); g.Config["cores"] != "2" {
		t.Fatalf("after the signed rollback: cores %s, want revision %d's 2", g.Config["cores"], rev1)
	}
}
