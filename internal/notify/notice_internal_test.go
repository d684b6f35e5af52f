package notify

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
)

func summary(kind planner.StatusKind, rev uint64, awaits planner.Approval, desiredAt time.Time) views.Summary {
	return views.Summary{VMID: 101, Cluster: "pve", State: kind, Revision: rev, AwaitsApproval: awaits, DesiredAt: desiredAt,
		Last: &views.ActionSummary{ID: "a1"}}
}

// Transitions make notices, a repeated state does not; keys name the
// cause; converged is a new revision reached, and a guest first seen
// converged before the route existed is the baseline.
func TestGuestTransitions(t *testing.T) {
	since := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	before, after := since.Add(-time.Hour), since.Add(time.Hour)
	var rec *guestRecord
	step := func(s views.Summary, wantKey string) {
		t.Helper()
		n, next := guestNotice(rec, s, s.Revision+100, since)
		switch {
		case wantKey == "" && n != nil:
			t.Fatalf("%s: unexpected notice %s", s.State, n.Key)
		case wantKey != "" && (n == nil || n.Key != wantKey):
			t.Fatalf("%s: notice %+v, want key %s", s.State, n, wantKey)
		}
		rec = &next
	}
	step(summary(planner.Converged, 3, "", before), "") // baseline
	step(summary(planner.Pending, 4, "", after), "")
	step(summary(planner.Error, 4, "", after), "pve/101/error/4/a1")
	step(summary(planner.Error, 4, "", after), "") // still in error
	// found by review: blocked (a Proxmox blip) or paused does not end
	// the episode; leaving error for another state does, and the next
	// episode has its own key.
	step(summary(planner.Blocked, 4, "", after), "")
	step(summary(planner.Error, 4, "", after), "")
	step(summary(planner.Paused, 4, "", after), "")
	step(summary(planner.Error, 4, "", after), "")
	step(summary(planner.Acting, 4, "", after), "")
	step(summary(planner.Error, 4, "", after), "pve/101/error/4/a1/e2")
	step(summary(planner.Held, 4, planner.AwaitsGuard, after), "pve/101/held/4/a1")
	step(summary(planner.Converged, 4, "", after), "pve/101/converged/4")
	step(summary(planner.Converged, 4, "", after), "")
	step(summary(planner.Pending, 5, planner.AwaitsDestroy, after), "pve/101/destroy-gated/5")
	step(summary(planner.Rejected, 6, "", after), "pve/101/rejected/106")
	step(summary(planner.Rejected, 6, "", after), "")
	step(summary(planner.Rejected, 7, "", after), "pve/101/rejected/107") // another rejected event
	rec = nil
	step(summary(planner.Converged, 9, "", after), "pve/101/converged/9") // first seen, published since
}

// An executor whose membership expired is lost with its partitions; one
// that left (a delete marker) is not; conditions notify on entering, each
// entry its own key.
func TestPollNotices(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	prev := pollRecord{Executors: map[string][]int{"x": {1, 3}, "y": {2}}}
	cur := leaseState{executors: map[string][]int{"z": {}}, planners: 1, left: map[string]bool{"y": true}, now: now}
	ns, next := pollNotices("pve", prev, cur, 0, 0)
	var keys []string
	for _, n := range ns {
		keys = append(keys, n.Key)
	}
	want := "pve/executor/x/lost/1 pve/partition/1/lost/x/1 pve/partition/3/lost/x/1"
	if got := strings.Join(keys, " "); got != want {
		t.Fatalf("keys %q, want %q", got, want)
	}
	// z's partition leases expire a poll before its membership (found in
	// CI: the partition notices were missing); 5 was taken by w, so it is
	// not z's any more.
	next.Executors = map[string][]int{"z": {4, 5}}
	cur = leaseState{executors: map[string][]int{"z": {}, "w": {5}}, planners: 1, left: map[string]bool{}, now: now}
	ns, next = pollNotices("pve", next, cur, 0, 0)
	if len(ns) != 0 || !slices.Equal(next.Executors["z"], []int{4}) || !slices.Equal(next.Executors["w"], []int{5}) {
		t.Fatalf("partitions expired before their member: %+v, held %v", ns, next.Executors)
	}
	cur = leaseState{executors: map[string][]int{"w": {5}}, planners: 1, left: map[string]bool{}, now: now}
	ns, next = pollNotices("pve", next, cur, 0, 0)
	if len(ns) != 2 || ns[0].Key != "pve/executor/z/lost/1" || ns[1].Key != "pve/partition/4/lost/z/1" {
		t.Fatalf("z lost with partition 4: %+v", ns)
	}
	cur = leaseState{executors: map[string][]int{}, planners: 1, left: map[string]bool{"w": true}, now: now}
	ns, next = pollNotices("pve", next, cur, 0, 0)
	if len(ns) != 1 || ns[0].Key != "pve/role/no-executor/1" {
		t.Fatalf("notices %+v", ns)
	}
	if ns, next = pollNotices("pve", next, cur, 0, 0); len(ns) != 0 {
		t.Fatalf("a condition still in force notified again: %+v", ns)
	}
	cur.executors = map[string][]int{"w": {}}
	_, next = pollNotices("pve", next, cur, 0, 0)
	cur.executors = map[string][]int{}
	cur.left = map[string]bool{"w": true}
	if ns, _ = pollNotices("pve", next, cur, 0, 0); len(ns) != 1 || ns[0].Key != "pve/role/no-executor/2" {
		t.Fatalf("second entry: %+v", ns)
	}

	// With a grace, a condition is told once it held that long, and one
	// that ended before is never told.
	const grace = 10 * time.Second
	rec := pollRecord{}
	at := func(d time.Duration, planners int) []Notice {
		ns, r := pollNotices("pve", rec, leaseState{executors: map[string][]int{"e": {}}, planners: planners, now: now.Add(d)}, 0, grace)
		rec = r
		return ns
	}
	if ns := at(0, 0); len(ns) != 0 {
		t.Fatalf("told at once: %+v", ns)
	}
	if ns := at(5*time.Second, 1); len(ns) != 0 {
		t.Fatalf("a condition that ended was told: %+v", ns)
	}
	at(6*time.Second, 0)
	if ns := at(15*time.Second, 0); len(ns) != 0 {
		t.Fatalf("told before its grace: %+v", ns)
	}
	if ns := at(16*time.Second, 0); len(ns) != 1 || ns[0].Key != "pve/role/no-planner/1" {
		t.Fatalf("after its grace: %+v", ns)
	}
	if ns := at(30*time.Second, 0); len(ns) != 0 {
		t.Fatalf("told twice: %+v", ns)
	}
}

// Secrets come from the environment or a file; a bad file is refused
// without quoting the URL.
func TestConfig(t *testing.T) {
	t.Setenv("HOOK", "https://hooks.example/T0/B0/secret")
	c, err := Parse([]byte("routes:\n- name: chat\n  url_secret: {env: HOOK}\n  format: slack\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := c.Routes[0]
	if r.url != "https://hooks.example/T0/B0/secret" || len(r.Triggers) != len(Triggers) || r.Retry.Max != DefaultRetries {
		t.Fatalf("route %+v", r)
	}
	for _, bad := range []string{
		"routes: []",
		"routes:\n- name: Bad\n  url: http://x\n",
		"routes:\n- name: a\n  url: ftp://secret-host/\n",
		"routes:\n- name: a\n  url: http://x\n  triggers: [nope]\n",
		"routes:\n- name: a\n  url: http://x\n  unknown: 1\n",
		"routes:\n- name: a\n  url: http://x\n  headers: {X: {env: NOT_SET_ANYWHERE}}\n",
		"routes:\n- name: a\n  url: http://x\n  throttle: {count: 1, per: 1m}\n",
	} {
		_, err := Parse([]byte(bad))
		if err == nil {
			t.Errorf("accepted %q", bad)
		} else if strings.Contains(err.Error(), "secret-host") {
			t.Errorf("error quotes the URL: %v", err)
		}
	}
}

// The Slack body is {"text": …} with the key; the generic one the notice.
func TestBodies(t *testing.T) {
	n := Notice{Key: "pve/1/error/2", Trigger: TriggerError, Text: "guest 1 entered error"}
	b, err := body(FormatSlack, n)
	if err != nil || string(b) != `{"text":"guest 1 entered error\nkey: pve/1/error/2"}` {
		t.Fatalf("slack: %s %v", b, err)
	}
	b, err = body(FormatJSON, n)
	if err != nil || !strings.Contains(string(b), `"key":"pve/1/error/2"`) || !strings.Contains(string(b), `"trigger":"error"`) {
		t.Fatalf("json: %s %v", b, err)
	}
}
