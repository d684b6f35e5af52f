package audit

import (
	"slices"
	"testing"

	"github.com/converge-pve/converge/events"
)

// History names every managed field of a desired state, the whole guest's
// too: a desired state of only those read as "nothing managed".
func TestDescribeDesiredWholeGuest(t *testing.T) {
	node, pool, tag, user := "pve2", "prod", 10, "ops"
	keys := []string{"ssh-ed25519 AAAA a@b"}
	d := &events.Desired{VMID: 101, Node: &node, Pool: &pool, SnapshotBefore: []string{"restart"},
		Disks:     map[string]events.DiskWant{"scsi0": {SizeGiB: 32}, "scsi1": {SizeGiB: 8, Storage: "local-lvm"}},
		Net:       map[string]events.NetWant{"net0": {Bridge: "vmbr1", Tag: &tag}},
		CloudInit: &events.CloudInit{User: &user, SSHKeys: &keys, IPConfig: map[string]string{"ipconfig0": "ip=dhcp"}}}
	want := `node=pve2 disks.scsi0=32G disks.scsi1=8G@local-lvm net.net0=bridge=vmbr1,tag=10 cloudinit(user=ops ssh_keys=1 ipconfig0=ip=dhcp) pool="prod" snapshot_before=restart`
	if got := DescribeDesired(d); got != want {
		t.Fatalf("DescribeDesired:\n got %s\nwant %s", got, want)
	}
}

// A control entry says why when the operator did, quoted: the journal
// holds anyone's text.
func TestDescribeControlReason(t *testing.T) {
	c := events.Control{Command: events.CommandPause, All: true}
	if got, want := describeControl(&c), "paused (all guests): converge does not act until resumed"; got != want {
		t.Errorf("without a reason: %q, want %q", got, want)
	}
	c.Reason = `swap "disk" on pve2`
	if got, want := describeControl(&c), `paused (all guests): converge does not act until resumed; reason: "swap \"disk\" on pve2"`; got != want {
		t.Errorf("with a reason: %q, want %q", got, want)
	}
	// One the planner does not fold (published past the CLI and the API)
	// is shown as ignored, its reason escaped (found by review: it read
	// "approved").
	c = events.Control{Command: events.CommandApprove, VMIDs: []int{101}, Reason: "line\nforged"}
	if got := describeControl(&c); got != `ignored "approve" request: "approve: reason: character U+000A at byte 4 is not text (one line of text: no newlines, tabs, control or format characters)"` {
		t.Errorf("an invalid request: %q", got)
	}
}

// Page walks a timeline newest first: each page's next is the following
// page's before, and the last page says 0.
func TestPage(t *testing.T) {
	var es []Entry
	for _, s := range []uint64{3, 5, 8, 9, 12} {
		es = append(es, Entry{Seq: s})
	}
	seqs := func(p []Entry) []uint64 {
		var out []uint64
		for _, e := range p {
			out = append(out, e.Seq)
		}
		return out
	}
	for _, tc := range []struct {
		before uint64
		limit  int
		want   []uint64
		next   uint64
	}{
		{0, 2, []uint64{12, 9}, 9},
		{9, 2, []uint64{8, 5}, 5},
		{5, 2, []uint64{3}, 0},
		{0, 5, []uint64{12, 9, 8, 5, 3}, 0},
		{0, 50, []uint64{12, 9, 8, 5, 3}, 0},
		{10, 1, []uint64{9}, 9},
		{3, 2, nil, 0},
		{100, 2, []uint64{12, 9}, 9},
	} {
		p, next := Page(es, tc.before, tc.limit)
		if !slices.Equal(seqs(p), tc.want) || next != tc.next || p == nil {
			t.Errorf("before %d limit %d: %v next %d, want %v next %d", tc.before, tc.limit, seqs(p), next, tc.want, tc.next)
		}
	}
	if p, next := Page(nil, 0, 50); p == nil || len(p) != 0 || next != 0 {
		t.Errorf("empty timeline: %v %d", p, next)
	}
}
