package planner

import (
	"testing"
	"time"
)

func TestGrant(t *testing.T) {
	now := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	node := Claim{Key: NodeKey("pve", "pve1"), Limit: 2}
	all := func(Entry) bool { return true }
	var es []Entry
	var ok, changed bool
	es, changed, ok = Grant(es, node, Entry{VMID: 101, ID: "a"}, all)
	if !ok || !changed || len(es) != 1 {
		t.Fatalf("first: %v %v %v", es, changed, ok)
	}
	es, _, ok = Grant(es, node, Entry{VMID: 102, ID: "b"}, all)
	if !ok || len(es) != 2 {
		t.Fatalf("second: %v %v", es, ok)
	}
	// Full: a third guest is refused, the same action again is granted
	// without a new entry.
	if _, _, ok = Grant(es, node, Entry{VMID: 103, ID: "c"}, all); ok {
		t.Fatal("third guest granted over the limit")
	}
	if out, changed, ok := Grant(es, node, Entry{VMID: 101, ID: "a"}, all); !ok || changed || len(out) != 2 {
		t.Fatalf("same action: %v %v %v", out, changed, ok)
	}
	// An entry that no longer takes room (its action finished) is dropped.
	done := func(e Entry) bool { return e.ID != "a" }
	es, changed, ok = Grant(es, node, Entry{VMID: 103, ID: "c"}, done)
	if !ok || !changed || len(es) != 2 || es[0].ID != "b" || es[1].ID != "c" {
		t.Fatalf("after a finished action: %v %v %v", es, changed, ok)
	}
	// The guard counts guests: a guest already in it is granted again.
	guard := Claim{Key: GuardKey("pve"), Limit: 1, Window: 5 * time.Minute}
	gs, _, _ := Grant(nil, guard, Entry{VMID: 101, ID: "a", At: now}, all)
	if _, _, ok := Grant(gs, guard, Entry{VMID: 101, ID: "a2", At: now}, all); !ok {
		t.Fatal("a guest's second disruptive action refused")
	}
	if _, _, ok := Grant(gs, guard, Entry{VMID: 102, ID: "b", At: now}, all); ok {
		t.Fatal("guard over its limit")
	}
	if out, changed := Withdraw(es, 103, "c"); !changed || len(out) != 1 {
		t.Fatalf("withdraw: %v %v", out, changed)
	}
}

// Live: a node entry takes room while its action is handed out or in
// flight, or (not yet folded) for claimGrace; a guard entry for its window.
func TestLive(t *testing.T) {
	e, err := NewEngine(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	node := Claim{Key: NodeKey("pve", "pve1"), Limit: 2}
	en := Entry{VMID: 101, ID: "x", At: now}
	if !e.Live(node, en, now.Add(claimGrace-time.Second)) || e.Live(node, en, now.Add(claimGrace)) {
		t.Fatal("an unfolded node entry lives for claimGrace")
	}
	e.awaiting[101] = "x"
	if !e.Live(node, en, now.Add(time.Hour)) {
		t.Fatal("a handed-out action's entry lapsed")
	}
	guard := Claim{Key: GuardKey("pve"), Limit: 5, Window: 5 * time.Minute}
	if !e.Live(guard, en, now.Add(4*time.Minute)) || e.Live(guard, en, now.Add(5*time.Minute)) {
		t.Fatal("a guard entry counts for the window")
	}
}
