package revise_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/journal/journaltest"
	"github.com/converge-pve/converge/internal/revise"
)

func ptr[T any](v T) *T { return &v }

func publish(t *testing.T, j *journaltest.Journal, d *events.Desired) uint64 {
	t.Helper()
	m, err := events.DesiredMessage(d, events.PublishOptions{Publisher: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ack, err := j.Append(context.Background(), m, journal.Expect{})
	if err != nil {
		t.Fatal(err)
	}
	return ack.Seq
}

// The releases of a pruning publish are the set's members missing from
// the file, and only those: not another set's guests, not guests outside
// any set, not the file's.
func TestSetReleases(t *testing.T) {
	cur := map[int]revise.Current{
		101: {Desired: &events.Desired{VMID: 101, Set: "web"}, Seq: 5},
		102: {Desired: &events.Desired{VMID: 102, Set: "web"}, Seq: 6},
		103: {Desired: &events.Desired{VMID: 103, Set: "db"}, Seq: 7},
		104: {Desired: &events.Desired{VMID: 104}, Seq: 8},
		105: {Desired: &events.Desired{VMID: 105, Set: "web"}, Seq: 9},
	}
	file := []*events.Desired{{VMID: 101}, {VMID: 106}}
	rs := revise.SetReleases("web", file, cur)
	var ids []int
	for _, r := range rs {
		ids = append(ids, r.VMID)
		if !strings.Contains(r.Reason, "released, not destroyed") {
			t.Errorf("release %d: reason %q", r.VMID, r.Reason)
		}
	}
	if !slices.Equal(ids, []int{102, 105}) {
		t.Fatalf("releases %v, want [102 105]", ids)
	}
	if err := revise.InSet("web", file); err != nil || file[0].Set != "web" {
		t.Fatalf("InSet: %v, %+v", err, file[0])
	}
	cs := revise.SetConflicts([]*events.Desired{{VMID: 103, Set: "web"}, {VMID: 104, Set: "web"}}, cur)
	if len(cs) != 1 || cs[0].VMID != 103 || !strings.Contains(cs[0].String(), "member of set db") {
		t.Fatalf("conflicts %+v, want 103 held by db", cs)
	}
	if err := revise.InSet("web", []*events.Desired{{VMID: 107, Set: "db"}}); err == nil {
		t.Fatal("a file entry naming another set was put in web")
	}
	if err := revise.InSet("Web", nil); err == nil {
		t.Fatal("set Web accepted")
	}
}

// A revision retention dropped fails with the reason; so do another
// guest's event and a rejected revision. --to-time finds the revision in
// force then.
func TestRevisionReasons(t *testing.T) {
	ctx := context.Background()
	clock := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	j := journaltest.New(1, func() time.Time { return clock })
	r1 := publish(t, j, &events.Desired{VMID: 101, Cores: ptr(2)})
	clock = clock.Add(time.Hour)
	other := publish(t, j, &events.Desired{VMID: 102, Cores: ptr(2)})
	bad := j.Publish(events.Message{Subject: events.Subject(events.KindDesired, events.DefaultCluster, 101), Data: []byte(`{"vmid":101,"cores":0}`)})
	r2 := publish(t, j, &events.Desired{VMID: 101, Cores: ptr(4)})

	if d, err := revise.Revision(ctx, j, events.DefaultCluster, 101, r1); err != nil || *d.Cores != 2 {
		t.Fatalf("revision %d: %+v, %v", r1, d, err)
	}
	if _, err := revise.Revision(ctx, j, events.DefaultCluster, 101, other); err == nil || !strings.Contains(err.Error(), "not a desired revision of guest 101") {
		t.Fatalf("another guest's event: %v", err)
	}
	if _, err := revise.Revision(ctx, j, events.DefaultCluster, 101, bad); err == nil || !strings.Contains(err.Error(), "rejected, never in force") {
		t.Fatalf("a rejected revision: %v", err)
	}
	if at, err := revise.RevisionAt(ctx, j, events.DefaultCluster, 101, clock.Add(-time.Minute)); err != nil || at != r1 {
		t.Fatalf("revision in force before the second: #%d, %v; want #%d", at, err, r1)
	}
	if at, err := revise.RevisionAt(ctx, j, events.DefaultCluster, 101, clock); err != nil || at != r2 {
		t.Fatalf("revision in force now: #%d, %v; want #%d (the rejected one skipped)", at, err, r2)
	}
	j.Trim(other)
	_, err := revise.Revision(ctx, j, events.DefaultCluster, 101, r1)
	if err == nil || !strings.Contains(err.Error(), "retention dropped it") {
		t.Fatalf("a revision retention dropped: %v", err)
	}
	if _, err := revise.RevisionAt(ctx, j, events.DefaultCluster, 101, clock.Add(-time.Hour)); err == nil || !strings.Contains(err.Error(), "retention dropped everything before") {
		t.Fatalf("a time before the journal's start: %v", err)
	}
	if _, err := revise.Revision(ctx, j, events.DefaultCluster, 101, 99); err == nil || !strings.Contains(err.Error(), "journal ends at") {
		t.Fatalf("a revision beyond the journal: %v", err)
	}
}

// Disks never shrink: a disk larger now (desired or in Proxmox) keeps its
// size and the rollback says so; one larger in Proxmox by a fraction of a
// GiB is left out. The set stays the current one.
func TestRollbackOfDisksAndSet(t *testing.T) {
	old := &events.Desired{VMID: 101, Cores: ptr(2), Set: "old",
		Disks: map[string]events.DiskWant{"scsi0": {SizeGiB: 4}, "scsi1": {SizeGiB: 8}, "scsi2": {SizeGiB: 2}, "scsi3": {SizeGiB: 1}}}
	cur := revise.Current{Seq: 9, Desired: &events.Desired{VMID: 101, Set: "web", Disks: map[string]events.DiskWant{"scsi0": {SizeGiB: 16}}}}
	obs := &events.Observed{}
	obs.Config.Disks = map[string]events.Disk{
		"scsi1": {SizeBytes: 10 << 30},
		"scsi2": {SizeBytes: 2<<30 + 512<<20},
		"scsi3": {SizeBytes: 1 << 30},
	}
	rb := revise.RollbackOf(101, 3, old, cur, obs)
	d := rb.Desired
	if rb.From != 9 || rb.To != 3 || d.Set != "web" || *d.Cores != 2 {
		t.Fatalf("rollback %+v", rb)
	}
	if d.Disks["scsi0"].SizeGiB != 16 || d.Disks["scsi1"].SizeGiB != 10 || d.Disks["scsi3"].SizeGiB != 1 {
		t.Fatalf("disks %+v: want scsi0 16, scsi1 10 kept, scsi3 1", d.Disks)
	}
	if _, ok := d.Disks["scsi2"]; ok {
		t.Fatalf("scsi2, 2.5 GiB in Proxmox, kept in %+v", d.Disks)
	}
	if old.Disks["scsi0"].SizeGiB != 4 || old.Set != "old" {
		t.Fatalf("the revision read was changed: %+v", old)
	}
	if len(rb.Notes) != 4 { // set, scsi0, scsi1, scsi2
		t.Fatalf("notes %q", rb.Notes)
	}
	if err := d.Validate(101); err != nil {
		t.Fatal(err)
	}
	m, err := rb.Message(events.DefaultCluster, "ops", "")
	if err != nil || m.Header.Get(revise.HeaderRollbackTo) != "3" || m.Header.Get(revise.HeaderRollbackFrom) != "9" {
		t.Fatalf("message %+v, %v", m.Header, err)
	}
}

// MayRelease tells a refused writer from a permitted one without storing
// anything.
func TestMayRelease(t *testing.T) {
	j := journaltest.New(1, time.Now)
	if err := revise.MayRelease(context.Background(), j, events.DefaultCluster); err != nil {
		t.Fatal(err)
	}
	if n := len(j.Entries()); n != 0 {
		t.Fatalf("the probe stored %d entries", n)
	}
	j.FailAppends(journal.ErrNotPermitted, 0)
	if err := revise.MayRelease(context.Background(), j, events.DefaultCluster); !errors.Is(err, journal.ErrNotPermitted) {
		t.Fatalf("refused writer: %v", err)
	}
}
