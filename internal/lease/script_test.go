package lease_test

import (
	"context"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/lease"
)

// A member that can no longer reach the store keeps its leases until they
// are stale on the clock (Held false first, TTL-Renew after its last
// renewal), then gives them up (OnLost) before they expire; the others
// take them over once they have, and hand the preferred ones back when
// the member returns.
func TestUnreachableMemberLosesItsPartitionsAfterTTL(t *testing.T) {
	ctx := context.Background()
	s := newScript(t)
	// All three are members from the start, so that none claims another's
	// share on the way.
	for _, id := range []string{"a", "b", "c"} {
		if _, err := s.store.Put(ctx, sGroup+".m."+id, nil); err != nil {
			t.Fatal(err)
		}
	}
	a := s.start("a", nil) // rounds at 0, 300ms, 600ms...
	s.advance(100 * time.Millisecond)
	b := s.start("b", nil) // 100ms, 400ms, 700ms...
	s.advance(100 * time.Millisecond)
	c := s.start("c", nil) // 200ms, 500ms, 800ms...
	three, two := lease.Assign(parts, []string{"a", "b", "c"}), lease.Assign(parts, []string{"a", "b"})
	s.checkHolds("after the starts", three, a, b, c)

	// c's last renewal is its round at 200ms; then it is cut off.
	c.conn.Cut(true)
	cShare := share(three, "c")
	s.advance(600 * time.Millisecond) // to 800ms: c has failed to renew twice
	for _, p := range cShare {
		if !c.m.Held(p) {
			t.Fatalf("at 800ms, 600ms after its last renewal, c no longer holds %d", p)
		}
	}
	s.advance(100 * time.Millisecond) // to 900ms: TTL-Renew after 200ms
	for _, p := range cShare {
		if c.m.Held(p) {
			t.Fatalf("at 900ms, TTL-Renew after its last renewal, c still holds %d", p)
		}
	}
	if got := c.m.Owned(); !slices.Equal(got, cShare) || len(s.lostBy("c")) > 0 {
		t.Fatalf("at 900ms c owns %v and lost %v: it should not have noticed yet (its next round is at 1.1s)", got, s.lostBy("c"))
	}
	s.checkHolds("at 900ms", three, a, b) // nobody else has them yet

	s.advance(200 * time.Millisecond) // to 1.1s: c's round finds them stale
	if got := s.lostBy("c"); !slices.Equal(got, cShare) {
		t.Fatalf("at 1.1s c lost %v, want %v", got, cShare)
	}
	if got := c.m.Owned(); len(got) > 0 {
		t.Fatalf("c still owns %v after losing them", got)
	}
	for _, p := range cShare {
		if o := s.owners()[p]; o != "" {
			t.Fatalf("at 1.1s partition %d is %s's before c's lease expired (at 1.2s)", p, o)
		}
	}

	// c's leases and membership expire at 1.2s: a takes its preferred ones
	// at once, b at its round at 1.3s.
	s.advance(200 * time.Millisecond)
	for _, p := range cShare {
		if o := s.owners()[p]; o != two[p] {
			t.Fatalf("at 1.3s partition %d (c's) is %q's, want %s's", p, o, two[p])
		}
	}
	s.advance(2 * time.Second) // what a and b swap between them is handed over
	s.checkHolds("with a and b", two, a, b)
	if got := a.m.Members(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("a sees members %v", got)
	}

	// c comes back: a and b release to it what it prefers (OnRelease, not
	// OnLost), and swap back what they swapped.
	s.mu.Lock()
	beforeA, beforeB := len(s.released["a"]), len(s.released["b"])
	s.mu.Unlock()
	if want := moved(three, two, "a", "b"); beforeA+beforeB != len(want) {
		t.Fatalf("a and b released %v and %v when c left, want %v", s.released["a"], s.released["b"], want)
	}
	c.conn.Cut(false)
	s.advance(2 * time.Second)
	s.checkHolds("after c's return", three, a, b, c)
	s.mu.Lock()
	gave := append(append([]int(nil), s.released["a"][beforeA:]...), s.released["b"][beforeB:]...)
	s.mu.Unlock()
	sort.Ints(gave)
	if want := moved(two, three, "a", "b"); !slices.Equal(gave, want) {
		t.Fatalf("a and b released %v when c returned, want %v", gave, want)
	}
	if len(s.lostBy("a")) > 0 || len(s.lostBy("b")) > 0 {
		t.Fatalf("a lost %v, b lost %v", s.lostBy("a"), s.lostBy("b"))
	}
	s.noViolations()
}

// A lease someone else wrote is lost at the next renewal, whatever the
// clock says; the partition comes back once the intruder's key expires.
func TestTakenLeaseIsLostAtOnce(t *testing.T) {
	ctx := context.Background()
	s := newScript(t)
	a := s.start("a", nil)
	all := lease.Assign(parts, []string{"a"})
	s.checkHolds("at the start", all, a)

	s.advance(100 * time.Millisecond)
	if _, err := s.store.Put(ctx, sGroup+".p.3", []byte("intruder")); err != nil {
		t.Fatal(err)
	}
	s.advance(200 * time.Millisecond) // a's round at 300ms
	if got := s.lostBy("a"); !slices.Equal(got, []int{3}) {
		t.Fatalf("lost %v, want [3]", got)
	}
	if a.m.Held(3) {
		t.Fatal("a still holds partition 3 after losing it")
	}
	if v, _ := s.store.Value(sGroup + ".p.3"); string(v) != "intruder" {
		t.Fatalf("partition 3's lease is %q", v)
	}
	// The intruder's lease expires at 1.1s; a's round at 900ms still finds
	// it, the one at 1.2s claims it.
	s.advance(800 * time.Millisecond)
	if a.m.Held(3) || s.owners()[3] != "" {
		t.Fatal("a took partition 3 back before the intruder's lease expired")
	}
	s.advance(100 * time.Millisecond)
	s.checkHolds("at 1.2s", all, a)
	if v, _ := s.store.Value(sGroup + ".p.3"); string(v) != "a" {
		t.Fatalf("partition 3's lease is %q", v)
	}
	s.noViolations()
}

// At shutdown, Run releases every partition (OnRelease) and deletes their
// leases and its membership.
func TestShutdownReleasesEverything(t *testing.T) {
	s := newScript(t)
	a := s.start("a", func(c *lease.Config) { c.Partitions = 2 })
	if got := a.m.Owned(); !slices.Equal(got, []int{0, 1}) {
		t.Fatalf("a owns %v", got)
	}
	a.cancel()
	<-a.done
	s.mu.Lock()
	released := slices.Sorted(slices.Values(s.released["a"]))
	s.mu.Unlock()
	if !slices.Equal(released, []int{0, 1}) {
		t.Errorf("released %v, want [0 1]", released)
	}
	for _, key := range []string{sGroup + ".p.0", sGroup + ".p.1", sGroup + ".m.a"} {
		if _, ok := s.store.Value(key); ok {
			t.Errorf("after Run: %s is present", key)
		}
	}
}

// At shutdown, Run waits for OnRelease up to ReleaseTimeout on the clock;
// a partition whose work outlasts it keeps its lease, which expires on its
// own, and the membership is deleted.
func TestShutdownGivesUpAfterReleaseTimeout(t *testing.T) {
	s := newScript(t)
	entered, stuck := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(stuck) })
	a := s.start("a", func(c *lease.Config) {
		c.Partitions = 1
		c.ReleaseTimeout = 250 * time.Millisecond // before the next renewal
		c.OnRelease = func(int) { close(entered); <-stuck }
	})
	a.cancel()
	<-entered // Run is leaving: its ReleaseTimeout runs from now
	s.clk.Advance(249 * time.Millisecond)
	select {
	case <-a.done:
		t.Fatal("Run returned before ReleaseTimeout while partition 0 was draining")
	default:
	}
	s.clk.Advance(time.Millisecond)
	<-a.done
	if _, ok := s.store.Value(sGroup + ".p.0"); !ok {
		t.Error("partition 0's lease was deleted while its work was in flight")
	}
	if _, ok := s.store.Value(sGroup + ".m.a"); ok {
		t.Error("a's membership is still there")
	}
	s.clk.Advance(sTTL)
	if _, ok := s.store.Value(sGroup + ".p.0"); ok {
		t.Error("partition 0's lease did not expire")
	}
}
