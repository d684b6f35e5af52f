package app_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/app"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/natsauth"
	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/internal/pvesim/pvesimtest"
	"github.com/converge-pve/converge/internal/revise"
	"github.com/converge-pve/converge/planner"
)

// publishSet publishes running guests vmids as set name, as `converge
// desire -f FILE --set name` does, reading the desired states in force
// from the views.
func (p *pipeline) publishSet(t *testing.T, name string, prune, move bool, vmids ...int) (revise.SetResult, error) {
	t.Helper()
	ctx := pvesimtest.Context(t)
	cur, err := revise.Currents(ctx, p.rd)
	if err != nil {
		t.Fatal(err)
	}
	running := events.PowerRunning
	var file []*events.Desired
	for _, id := range vmids {
		file = append(file, &events.Desired{VMID: id, Power: &running})
	}
	return revise.PublishSet(ctx, p.a.Bus(), cur, file, revise.SetOptions{Cluster: events.DefaultCluster, Set: name,
		Prune: prune, Move: move, Publisher: "test"})
}

func lastSeq(t *testing.T, p *pipeline) uint64 {
	t.Helper()
	info, err := p.a.Bus().Info(pvesimtest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	return info.LastSeq
}

// --prune releases exactly the set's members dropped from the file: their
// views show them released (unmanaged, no desired state), the members kept
// and another set's guest keep theirs, and Proxmox sees no mutation. A
// guest another set holds is refused before anything is published, and
// moved with --move.
func TestPruneReleasesDroppedMembers(t *testing.T) {
	p := startPipeline(t, pvesim.Options{Nodes: 1}, verifyEveryPass)
	all := []int{501, 502, 503, 504}
	for _, id := range all {
		if err := p.sim.AddGuest(pvesim.GuestSpec{VMID: id, Node: "pve1", Running: true}); err != nil {
			t.Fatal(err)
		}
	}
	p.pass(t)
	web, err := p.publishSet(t, "web", false, false, 501, 502, 503)
	if err != nil {
		t.Fatal(err)
	}
	db, err := p.publishSet(t, "db", false, false, 504)
	if err != nil {
		t.Fatal(err)
	}
	for _, pub := range append(web.Published, db.Published...) {
		p.converge(t, pub.VMID, pub.Seq)
	}
	for _, id := range all {
		p.settle(t, id)
	}

	// 504 is db's: refused into web, and nothing is published.
	before := lastSeq(t, p)
	if _, err := p.publishSet(t, "web", false, false, 501, 504); err == nil || !strings.Contains(err.Error(), "member of set db") {
		t.Fatalf("a guest of set db published into web: %v", err)
	}
	if after := lastSeq(t, p); after != before {
		t.Fatalf("a refused set publish journalled #%d..#%d", before+1, after)
	}

	mutations := p.sim.Mutations()
	res, err := p.publishSet(t, "web", true, false, 501)
	if err != nil {
		t.Fatal(err)
	}
	var released []int
	for _, r := range res.Releases {
		released = append(released, r.VMID)
	}
	if !slices.Equal(released, []int{502, 503}) || res.ReleaseSeq == 0 {
		t.Fatalf("released %v (#%d), want [502 503]", released, res.ReleaseSeq)
	}
	for _, id := range all {
		p.settleIn(t, id)
	}
	if n := p.sim.Mutations() - mutations; n != 0 {
		t.Fatalf("the pruning publish made %d Proxmox mutations, want 0", n)
	}
	for _, id := range all {
		doc := p.caughtUp(t, id, nil)
		v := doc.View
		switch id {
		case 502, 503:
			if v.Desired != nil || v.Released == nil || v.Released.Seq != res.ReleaseSeq || doc.Status.Kind != planner.Unmanaged {
				t.Fatalf("guest %d not released: desired %+v released %+v status %s", id, v.Desired, v.Released, doc.Status.Kind)
			}
		default:
			want := map[int]string{501: "web", 504: "db"}[id]
			if v.Desired == nil || v.Desired.Set != want || v.Released != nil || doc.Status.Kind != planner.Converged {
				t.Fatalf("guest %d: desired %+v released %+v status %s, want converged in set %s", id, v.Desired, v.Released, doc.Status.Kind, want)
			}
		}
		if g, _ := p.sim.Guest(id); g.Status != "running" {
			t.Fatalf("guest %d is %s in Proxmox", id, g.Status)
		}
	}

	// --move takes 504 into web.
	moved, err := p.publishSet(t, "web", false, true, 501, 504)
	if err != nil {
		t.Fatal(err)
	}
	if doc := p.caughtUp(t, 504, nil); doc.View.Desired == nil || doc.View.Desired.Set != "web" || doc.View.DesiredSeq != moved.Published[1].Seq {
		t.Fatalf("504 not moved into web: %+v", doc.View.Desired)
	}
}

// A NATS user that may not publish control requests (publisher) is
// refused a pruning publish before anything is published; the API role
// may release.
func TestPruneRefusedForPublisherUser(t *testing.T) {
	creds, _, err := natsauth.LoadOrCreate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := startPipeline(t, pvesim.Options{Nodes: 1}, nil, func(c *app.Config) {
		c.Embedded.Users = creds.Users(natsauth.DefaultNames)
		c.Bus.User, c.Bus.Password = string(natsauth.Admin), creds[natsauth.Admin]
	})
	ctx := pvesimtest.Context(t)
	as := func(r natsauth.Role) *bus.Bus {
		bc := bus.DefaultConfig()
		bc.URLs, bc.User, bc.Password, bc.Logger = p.a.Server().ClientURL(), string(r), creds[r], zerolog.Nop()
		b, err := bus.Connect(ctx, bc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		return b
	}
	if err := p.sim.AddGuest(pvesim.GuestSpec{VMID: 511, Node: "pve1", Running: true}); err != nil {
		t.Fatal(err)
	}
	p.pass(t)
	first, err := p.publishSet(t, "web", false, false, 511)
	if err != nil {
		t.Fatal(err)
	}
	p.converge(t, 511, first.Published[0].Seq)
	cur, err := revise.Currents(ctx, p.rd)
	if err != nil {
		t.Fatal(err)
	}

	before := lastSeq(t, p)
	running := events.PowerRunning
	file := []*events.Desired{{VMID: 512, Power: &running}}
	_, err = revise.PublishSet(ctx, as(natsauth.Publisher), cur, file, revise.SetOptions{Cluster: events.DefaultCluster, Set: "web", Prune: true, Publisher: "test"})
	if !errors.Is(err, journal.ErrNotPermitted) || !strings.Contains(err.Error(), "nothing was published") {
		t.Fatalf("the publisher user's pruning publish: %v, want refused", err)
	}
	if after := lastSeq(t, p); after != before {
		t.Fatalf("a refused pruning publish journalled #%d..#%d", before+1, after)
	}
	// Without --prune the publisher user may publish the set.
	if _, err := revise.PublishSet(ctx, as(natsauth.Publisher), cur, file, revise.SetOptions{Cluster: events.DefaultCluster, Set: "web", Publisher: "test"}); err != nil {
		t.Fatal(err)
	}
	if err := revise.MayRelease(ctx, as(natsauth.API), events.DefaultCluster); err != nil {
		t.Fatalf("the api user may not release: %v", err)
	}
	if err := revise.MayRelease(context.Background(), as(natsauth.Admin), events.DefaultCluster); err != nil {
		t.Fatalf("the admin user may not release: %v", err)
	}
}
