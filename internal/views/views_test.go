package views_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/bus/bustest"
	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
	"github.com/converge-pve/converge/projector"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

func doc(cluster string, vmid int, kind planner.StatusKind, reason string) views.GuestDoc {
	return views.GuestDoc{
		View: &projector.View{VMID: vmid, Cluster: cluster, Desired: &events.Desired{VMID: vmid, Power: ptr(events.PowerRunning)},
			DesiredSeq: uint64(vmid), Publisher: "test", Seq: uint64(vmid)},
		Status:    planner.Status{Kind: kind, Reason: reason},
		UpdatedAt: t0,
	}
}

type fixture struct {
	ctx context.Context
	kv  jetstream.KeyValue
	r   views.Reader
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	b := bustest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	kv, err := b.Views(ctx)
	if err != nil {
		t.Fatal(err)
	}
	store, err := b.ViewStore()
	if err != nil {
		t.Fatal(err)
	}
	return fixture{ctx: ctx, kv: kv, r: views.Reader{Store: store, Cluster: "pve"}}
}

func (f fixture) put(t *testing.T, key string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.kv.Put(f.ctx, key, b); err != nil {
		t.Fatal(err)
	}
}

func TestListEmpty(t *testing.T) {
	f := newFixture(t)
	docs, err := f.r.List(f.ctx)
	if err != nil || len(docs) != 0 {
		t.Fatalf("List of an empty bucket = %v, %v", docs, err)
	}
	// Only the cluster document: still no guests.
	f.put(t, views.ClusterKey("pve"), views.ClusterDoc{Planner: "p"})
	docs, err = f.r.List(f.ctx)
	if err != nil || len(docs) != 0 {
		t.Fatalf("List with only the cluster key = %v, %v", docs, err)
	}
}

func TestListSkipsClusterKeyAndSortsByVMID(t *testing.T) {
	f := newFixture(t)
	for _, vmid := range []int{2000, 101, 300, 1000, 400} {
		f.put(t, views.GuestKey("pve", vmid), doc("pve", vmid, planner.Converged, ""))
	}
	f.put(t, views.ClusterKey("pve"), views.ClusterDoc{Planner: "p", Seq: 9})
	f.put(t, views.GuestKey("lab", 150), doc("lab", 150, planner.Pending, ""))
	f.put(t, views.GuestKey("pve2", 160), doc("pve2", 160, planner.Pending, ""))
	if err := f.kv.Delete(f.ctx, views.GuestKey("pve", 400)); err != nil {
		t.Fatal(err)
	}
	docs, err := f.r.List(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, d := range docs {
		got = append(got, d.View.VMID)
		if d.View.Cluster != "pve" {
			t.Errorf("document of cluster %q listed", d.View.Cluster)
		}
	}
	if want := []int{101, 300, 1000, 2000}; !reflect.DeepEqual(got, want) {
		t.Fatalf("List vmids %v, want %v (numeric order, cluster key, other clusters and deleted keys skipped)", got, want)
	}
}

func TestGuest(t *testing.T) {
	f := newFixture(t)
	d, err := f.r.Guest(f.ctx, 101)
	if d != nil || err != nil {
		t.Fatalf("Guest of a missing key = %+v, %v; want nil, nil", d, err)
	}
	want := doc("pve", 101, planner.Acting, "start: desired running")
	f.put(t, views.GuestKey("pve", 101), want)
	d, err = f.r.Guest(f.ctx, 101)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*d, want) {
		t.Fatalf("Guest = %+v, want %+v", d, want)
	}
	// Another cluster's reader does not see it.
	if d, err := (views.Reader{Store: f.r.Store, Cluster: "lab"}).Guest(f.ctx, 101); d != nil || err != nil {
		t.Fatalf("lab reader saw pve's guest: %+v %v", d, err)
	}
	// A corrupt document is an error, not a missing guest.
	if _, err := f.kv.Put(f.ctx, views.GuestKey("pve", 102), []byte("{")); err != nil {
		t.Fatal(err)
	}
	if d, err := f.r.Guest(f.ctx, 102); err == nil {
		t.Fatalf("corrupt document decoded as %+v", d)
	}
}

func TestClusterDoc(t *testing.T) {
	f := newFixture(t)
	d, err := f.r.ClusterDoc(f.ctx)
	if d != nil || err != nil {
		t.Fatalf("ClusterDoc before any planner = %+v, %v; want nil, nil", d, err)
	}
	want := views.ClusterDoc{State: projector.ClusterState{Cluster: "pve", HeartbeatAt: t0, HeartbeatSeq: 7, Reachable: true,
		Interval: 10 * time.Second}, Seq: 42, Planner: "planner-1", UpdatedAt: t0.Add(time.Second)}
	f.put(t, views.ClusterKey("pve"), want)
	d, err = f.r.ClusterDoc(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*d, want) {
		t.Fatalf("ClusterDoc = %+v, want %+v", d, want)
	}
}

func TestWatchDeliversCurrentThenUpdates(t *testing.T) {
	f := newFixture(t)
	f.put(t, views.GuestKey("pve", 101), doc("pve", 101, planner.Pending, "first"))
	f.put(t, views.GuestKey("pve", 102), doc("pve", 102, planner.Converged, ""))
	f.put(t, views.ClusterKey("pve"), views.ClusterDoc{Planner: "p"})
	f.put(t, views.GuestKey("lab", 103), doc("lab", 103, planner.Pending, ""))

	ctx, cancel := context.WithCancel(f.ctx)
	ch, err := f.r.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	next := func() *views.GuestDoc {
		t.Helper()
		select {
		case d, ok := <-ch:
			if !ok {
				t.Fatal("watch channel closed early")
			}
			return d
		case <-f.ctx.Done():
			t.Fatal("no document from Watch")
		}
		return nil
	}
	// The current documents first, in the order they were written.
	if d := next(); d.View.VMID != 101 || d.Status.Reason != "first" {
		t.Fatalf("first document %+v", d.View)
	}
	if d := next(); d.View.VMID != 102 {
		t.Fatalf("second document %+v", d.View)
	}
	// Then updates; the cluster key, deletions, corrupt and non-guest keys
	// are not guest documents and are skipped.
	f.put(t, views.ClusterKey("pve"), views.ClusterDoc{Planner: "q"})
	if err := f.kv.Delete(f.ctx, views.GuestKey("pve", 102)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.kv.Put(f.ctx, views.GuestKey("pve", 104), []byte("not json")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.kv.Put(f.ctx, "pve.other", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	f.put(t, views.GuestKey("pve", 101), doc("pve", 101, planner.Converged, "second"))
	if d := next(); d.View.VMID != 101 || d.Status.Kind != planner.Converged || d.Status.Reason != "second" {
		t.Fatalf("update %+v %+v", d.View, d.Status)
	}
	// Cancelling the context closes the channel.
	cancel()
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-f.ctx.Done():
			t.Fatal("watch channel not closed after cancel")
		}
	}
}

// TestDocumentsWithoutView: a key that is not a guest key is not listed,
// and a guest document without its view is an error, never a nil view
// handed to callers (Summarise and sorting dereference it).
func TestDocumentsWithoutView(t *testing.T) {
	f := newFixture(t)
	f.put(t, views.GuestKey("pve", 101), doc("pve", 101, planner.Converged, ""))
	if _, err := f.kv.Put(f.ctx, "pve.other", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	docs, err := f.r.List(f.ctx)
	if err != nil || len(docs) != 1 || docs[0].View.VMID != 101 {
		t.Fatalf("List = %+v, %v; want only guest 101", docs, err)
	}
	for _, bad := range []string{`{}`, `null`, `{"status":{"state":"converged"}}`} {
		if _, err := f.kv.Put(f.ctx, views.GuestKey("pve", 102), []byte(bad)); err != nil {
			t.Fatal(err)
		}
		if d, err := f.r.Guest(f.ctx, 102); err == nil {
			t.Errorf("Guest of %s = %+v, want an error", bad, d)
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("List panicked on %s: %v", bad, r)
				}
			}()
			if docs, err := f.r.List(f.ctx); err == nil {
				t.Errorf("List with %s at a guest key = %+v, want an error", bad, docs)
			}
		}()
	}
}

// Follow marks the end of the current documents with one nil, then
// streams updates; on an empty bucket the mark comes at once.
func TestFollowMarksCaughtUp(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	next := func(ch <-chan *views.GuestDoc) *views.GuestDoc {
		t.Helper()
		select {
		case d, ok := <-ch:
			if !ok {
				t.Fatal("follow channel closed early")
			}
			return d
		case <-f.ctx.Done():
			t.Fatal("nothing from Follow")
		}
		return nil
	}
	empty, err := f.r.Follow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := next(empty); d != nil {
		t.Fatalf("empty bucket: %+v before the mark", d.View)
	}
	f.put(t, views.GuestKey("pve", 101), doc("pve", 101, planner.Pending, "first"))
	f.put(t, views.GuestKey("pve", 102), doc("pve", 102, planner.Converged, ""))
	if d := next(empty); d == nil || d.View.VMID != 101 {
		t.Fatalf("update after the mark: %+v", d)
	}
	ch, err := f.r.Follow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []int{101, 102} {
		if d := next(ch); d == nil || d.View.VMID != want {
			t.Fatalf("current document %d: %+v", want, d)
		}
	}
	if d := next(ch); d != nil {
		t.Fatalf("no mark after the current documents: %+v", d.View)
	}
	f.put(t, views.GuestKey("pve", 101), doc("pve", 101, planner.Converged, "second"))
	if d := next(ch); d == nil || d.Status.Reason != "second" {
		t.Fatalf("update: %+v", d)
	}
}
