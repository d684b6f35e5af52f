package planner

import (
	"math/rand/v2"
	"testing"
)

// TestVMIDSetAgreesWithMap adds and removes vmids, dense, spread apart and
// negative, and checks the set against a map after each change.
func TestVMIDSetAgreesWithMap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var s vmidSet
	m := map[int]bool{}
	pick := func() int {
		switch r.IntN(3) {
		case 0:
			return 100 + r.IntN(300) // dense
		case 1:
			return r.IntN(1_000_000_000) // spread apart
		default:
			return -r.IntN(200) // not a vmid Proxmox gives, still a set member
		}
	}
	for i := 0; i < 20000; i++ {
		id := pick()
		if r.IntN(2) == 0 {
			s.add(id)
			m[id] = true
		} else {
			s.remove(id)
			delete(m, id)
		}
		if s.len() != len(m) {
			t.Fatalf("step %d: len %d, want %d", i, s.len(), len(m))
		}
		if s.has(id) != m[id] {
			t.Fatalf("step %d: has(%d) = %v, want %v", i, id, s.has(id), m[id])
		}
	}
	for id := range m {
		if !s.has(id) {
			t.Fatalf("lost %d", id)
		}
		s.remove(id)
	}
	if s.len() != 0 || len(s.words) != 0 {
		t.Fatalf("emptied set holds %d vmids in %d words", s.len(), len(s.words))
	}
	var zero vmidSet
	if zero.has(100) || zero.len() != 0 {
		t.Fatal("zero set not empty")
	}
	zero.remove(100) // no panic on a nil map
}
