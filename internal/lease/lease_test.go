package lease_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/bus/bustest"
	"github.com/converge-pve/converge/internal/lease"
)

const parts = 16

// member runs one Manager on its own connection and records who owns what
// according to the callbacks.
type member struct {
	id     string
	b      *bus.Bus
	m      *lease.Manager
	cancel context.CancelFunc
	done   chan struct{}
}

type world struct {
	t  *testing.T
	mu sync.Mutex
	// owner[p] is who is working on p according to callbacks; two owners
	// at once is a violation.
	owner      map[int]string
	violations []string
	lost       map[string][]int
}

func newWorld(t *testing.T) *world {
	return &world{t: t, owner: map[int]string{}, lost: map[string][]int{}}
}

func (w *world) start(t *testing.T, srvBus *bus.Bus, id string) *member {
	b := bustest.Connect(t, bustest.Server(t, srvBus))
	mb := &member{id: id, b: b, done: make(chan struct{})}
	cfg := config("executor-test", id, parts)
	cfg.TTL, cfg.Renew, cfg.Logger = time.Second, 150*time.Millisecond, zerolog.Nop()
	cfg.OnAcquire = func(p int) {
		w.mu.Lock()
		defer w.mu.Unlock()
		if o, ok := w.owner[p]; ok && o != id {
			w.violations = append(w.violations, fmt.Sprintf("partition %d acquired by %s while %s works on it", p, id, o))
		}
		w.owner[p] = id
	}
	cfg.OnRelease = func(p int) { w.drop(p, id) }
	cfg.OnLost = func(p int) {
		w.drop(p, id)
		w.mu.Lock()
		w.lost[id] = append(w.lost[id], p)
		w.mu.Unlock()
	}
	m, err := lease.New(cfg, b.LeaseStore)
	if err != nil {
		t.Fatal(err)
	}
	mb.m = m
	ctx, cancel := context.WithCancel(context.Background())
	mb.cancel = cancel
	go func() { defer close(mb.done); _ = m.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-mb.done })
	return mb
}

func (w *world) drop(p int, id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.owner[p] == id {
		delete(w.owner, p)
	}
}

// shares returns how many partitions each member works on, once every
// partition has exactly one owner; ok is false before that.
func (w *world) shares() (map[string]int, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := map[string]int{}
	for _, o := range w.owner {
		n[o]++
	}
	return n, len(w.owner) == parts
}

func eventually(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition, not synchronising
	}
}

func balanced(w *world, members ...string) func() bool {
	return func() bool {
		n, ok := w.shares()
		if !ok || len(n) != len(members) {
			return false
		}
		lo, hi := parts/len(members), (parts+len(members)-1)/len(members)
		for _, id := range members {
			if n[id] < lo || n[id] > hi {
				return false
			}
		}
		return true
	}
}

func TestSharesFailoverAndJoin(t *testing.T) {
	srv := bustest.New(t)
	w := newWorld(t)
	a, b := w.start(t, srv, "a"), w.start(t, srv, "b")
	c := w.start(t, srv, "c")
	eventually(t, 20*time.Second, "three balanced shares", balanced(w, "a", "b", "c"))
	for _, mb := range []*member{a, b, c} {
		for _, p := range mb.m.Owned() {
			if !mb.m.Held(p) {
				t.Errorf("%s owns %d but does not hold it", mb.id, p)
			}
		}
	}

	// c dies: its connection goes first, so it can neither renew nor
	// release; its leases must expire and move to a and b.
	cOwned := c.m.Owned()
	c.b.NC.Close()
	c.cancel()
	<-c.done
	w.mu.Lock()
	for p, o := range w.owner { // c's process is gone: its work with it
		if o == "c" {
			delete(w.owner, p)
		}
	}
	w.mu.Unlock()
	start := time.Now()
	eventually(t, 20*time.Second, "c's partitions taken over", balanced(w, "a", "b"))
	t.Logf("takeover of %d partitions after %s (TTL 1s)", len(cOwned), time.Since(start).Round(10*time.Millisecond))

	// d joins and gets a share; nothing is owned twice on the way.
	w.start(t, srv, "d")
	eventually(t, 20*time.Second, "d gets a share", balanced(w, "a", "b", "d"))
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.violations) > 0 {
		t.Fatalf("partitions owned twice: %v", w.violations)
	}
}

func TestLostLeaseStopsWork(t *testing.T) {
	srv := bustest.New(t)
	w := newWorld(t)
	a := w.start(t, srv, "a")
	eventually(t, 20*time.Second, "a owns everything", balanced(w, "a"))
	// Another process takes partition 3 (as if a had stalled past its TTL).
	store, err := srv.LeaseStore(context.Background(), time.Second, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Put(context.Background(), "executor-test.p.3", []byte("intruder")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "a loses partition 3", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.lost["a"]) > 0
	})
	if a.m.Held(3) {
		t.Fatal("a still claims partition 3 after losing it")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if got := w.lost["a"]; len(got) != 1 || got[0] != 3 {
		t.Fatalf("lost %v, want [3]", got)
	}
}

func TestAssignBalancedAndStable(t *testing.T) {
	for n := 1; n <= 8; n++ {
		var ms []string
		for i := range n {
			ms = append(ms, fmt.Sprintf("executor@host%d-%04x", i, i*7919))
		}
		got := lease.Assign(parts, ms)
		load := map[string]int{}
		for _, o := range got {
			load[o]++
		}
		for _, id := range ms {
			if l := load[id]; l < parts/n || l > (parts+n-1)/n {
				t.Errorf("%d members: %s prefers %d partitions", n, id, l)
			}
		}
		if n > 1 {
			// Removing one member moves only what it had, plus what the
			// bound pushes around.
			after := lease.Assign(parts, ms[1:])
			moved := 0
			for p := range got {
				if got[p] != ms[0] && after[p] != got[p] {
					moved++
				}
			}
			if moved > parts/2 {
				t.Errorf("%d members: removing one moved %d other partitions", n, moved)
			}
		}
	}
}

func TestMemberIDIsAValidKeyToken(t *testing.T) {
	for _, name := range []string{"executor@pve1.example.com", "planner@host with spaces", "ünïcode>*"} {
		id := lease.MemberID(name)
		if _, err := lease.New(config("executor-pve", id, 1), bustest.New(t).LeaseStore); err != nil {
			t.Fatalf("MemberID(%q) = %q: %v", name, id, err)
		}
	}
	if _, err := lease.New(config("executor-pve", "executor@pve1", 1), bustest.New(t).LeaseStore); err == nil {
		t.Fatal("a member id with '@' was accepted; NATS refuses it as a key")
	}
}
