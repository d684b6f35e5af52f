package planner

import (
	"reflect"
	"testing"
)

// TestDecisionsKeepTheLast sets plain and other decisions in turn, past a
// mass change that makes own anew, and checks every guest's last one.
func TestDecisionsKeepTheLast(t *testing.T) {
	var ds decisions
	want := map[int]Decision{}
	acting := func() Decision {
		return Decision{Status: Status{Kind: Acting, Reason: "set_config"}, Steps: []Step{{Op: "set_config", Reason: "config drift"}}}
	}
	check := func(when string) {
		t.Helper()
		for id, w := range want {
			if got, ok := ds.get(id); !ok || !reflect.DeepEqual(got, w) {
				t.Fatalf("%s: guest %d: %v %v, want %v", when, id, got, ok, w)
			}
		}
		if _, ok := ds.get(99); ok {
			t.Fatalf("%s: a guest never planned has a decision", when)
		}
	}
	const n = 4 * minOwnRemake
	for id := 100; id < 100+n; id++ { // a mass change: every guest acting
		ds.set(id, acting())
		want[id] = acting()
	}
	check("all acting")
	if ds.ownHigh != n {
		t.Fatalf("ownHigh %d, want %d", ds.ownHigh, n)
	}
	for id := 100; id < 100+n-10; id++ { // most converge
		ds.set(id, Decision{Status: Status{Kind: Converged}})
		want[id] = plainConverged
	}
	check("most converged")
	if len(ds.own) != 10 || ds.ownHigh >= n {
		t.Fatalf("own holds %d (high %d) after the mass change, want 10 and made anew", len(ds.own), ds.ownHigh)
	}
	d := acting()
	d.Status.Reason = "again"
	ds.set(100, d) // plain to own
	want[100] = d
	ds.set(100+n-1, d) // own overwritten in place
	want[100+n-1] = d
	check("replanned")
	if ds.plain.has(100) || ds.plain.has(100+n-1) {
		t.Fatal("a guest with its own decision is still in the plain set")
	}
}
