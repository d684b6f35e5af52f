package lease_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/internal/clock/clocktest"
	"github.com/converge-pve/converge/internal/lease"
	"github.com/converge-pve/converge/internal/lease/leasetest"
)

// A script runs members on a fake clock over an in-memory store. Their
// starts are staggered so that no two rounds fall due at the same instant;
// advance moves the clock from one member's round to the next and waits
// for each (and for the releases it started) before going on. Every run
// is the same: nothing here sleeps or polls.
type script struct {
	t     *testing.T
	clk   *clocktest.Fake
	store *leasetest.Store
	t0    time.Time
	ms    []*scripted

	mu         sync.Mutex
	owner      map[int]string // who works on each partition, by the callbacks
	violations []string
	lost       map[string][]int
	released   map[string][]int
}

type scripted struct {
	id     string
	conn   *leasetest.Conn
	m      *lease.Manager
	rounds chan struct{} // a round is over
	next   time.Time     // when its next round falls due
	cancel context.CancelFunc
	done   chan struct{}
}

const (
	sGroup = "executor-fake"
	sTTL   = time.Second
	sRenew = 300 * time.Millisecond // TTL-Renew = 700ms is not a multiple of Renew
)

func newScript(t *testing.T) *script {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktest.New(t0)
	return &script{t: t, clk: clk, store: leasetest.New(clk), t0: t0,
		owner: map[int]string{}, lost: map[string][]int{}, released: map[string][]int{}}
}

// start runs a member from now and waits for its first round.
func (s *script) start(id string, tune func(*lease.Config)) *scripted {
	s.t.Helper()
	mb := &scripted{id: id, conn: s.store.Conn(), rounds: make(chan struct{}), done: make(chan struct{})}
	cfg := lease.DefaultConfig()
	cfg.Group, cfg.Member, cfg.Partitions, cfg.TTL, cfg.Renew = sGroup, id, parts, sTTL, sRenew
	cfg.Clock, cfg.Logger = s.clk, zerolog.Nop()
	cfg.OnAcquire = func(p int) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if o, ok := s.owner[p]; ok && o != id {
			s.violations = append(s.violations, fmt.Sprintf("partition %d acquired by %s while %s works on it", p, id, o))
		}
		s.owner[p] = id
	}
	cfg.OnRelease = func(p int) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.released[id] = append(s.released[id], p)
		s.dropLocked(p, id)
	}
	cfg.OnLost = func(p int) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.lost[id] = append(s.lost[id], p)
		s.dropLocked(p, id)
	}
	if tune != nil {
		tune(&cfg)
	}
	m, err := lease.New(cfg, mb.conn.Open)
	if err != nil {
		s.t.Fatal(err)
	}
	mb.m = m
	ctx, cancel := context.WithCancel(context.Background())
	mb.cancel = cancel
	lease.AfterRound(m, func() {
		select {
		case mb.rounds <- struct{}{}:
		case <-ctx.Done():
		}
	})
	go func() { defer close(mb.done); _ = m.Run(ctx) }()
	s.t.Cleanup(func() { cancel(); <-mb.done })
	s.ms = append(s.ms, mb)
	s.waitRound(mb)
	mb.next = s.clk.Now().Add(sRenew)
	return mb
}

func (s *script) dropLocked(p int, id string) {
	if s.owner[p] == id {
		delete(s.owner, p)
	}
}

// waitRound waits for mb's round to end, then for the releases it started.
func (s *script) waitRound(mb *scripted) {
	s.t.Helper()
	select {
	case <-mb.rounds:
	case <-time.After(10 * time.Second): // a guard against a hang, not a wait
		s.t.Fatalf("%s: no round at %s", mb.id, s.clk.Now().Sub(s.t0))
	}
	lease.Drained(mb.m)
}

// advance moves the clock d forward, one member's round at a time.
func (s *script) advance(d time.Duration) {
	s.t.Helper()
	end := s.clk.Now().Add(d)
	for {
		var due *scripted
		for _, mb := range s.ms {
			if mb.next.After(end) || isDone(mb) {
				continue
			}
			if due != nil && mb.next.Equal(due.next) {
				s.t.Fatalf("%s and %s are due at the same instant: stagger their starts", due.id, mb.id)
			}
			if due == nil || mb.next.Before(due.next) {
				due = mb
			}
		}
		if due == nil {
			s.clk.Advance(end.Sub(s.clk.Now()))
			return
		}
		s.clk.Advance(due.next.Sub(s.clk.Now()))
		s.waitRound(due)
		due.next = due.next.Add(sRenew)
	}
}

func isDone(mb *scripted) bool {
	select {
	case <-mb.done:
		return true
	default:
		return false
	}
}

// owners returns who works on each partition, "" for nobody.
func (s *script) owners() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, parts)
	for p, o := range s.owner {
		out[p] = o
	}
	return out
}

func (s *script) lostBy(id string) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(slices.Values(s.lost[id]))
}

func (s *script) noViolations() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.violations) > 0 {
		s.t.Fatalf("partitions owned twice: %v", s.violations)
	}
}

// share is what id prefers in an assignment, in order.
func share(assigned []string, id string) []int {
	var ps []int
	for p, o := range assigned {
		if o == id {
			ps = append(ps, p)
		}
	}
	return ps
}

// moved returns the partitions that the members who prefer them in from
// (among who) no longer prefer in to, in order.
func moved(from, to []string, who ...string) []int {
	var ps []int
	for p := range from {
		if slices.Contains(who, from[p]) && to[p] != from[p] {
			ps = append(ps, p)
		}
	}
	return ps
}

// checkHolds checks that the callbacks and each member's Owned and Held
// agree with an assignment.
func (s *script) checkHolds(when string, want []string, mbs ...*scripted) {
	s.t.Helper()
	if got := s.owners(); !slices.Equal(got, want) {
		s.t.Fatalf("%s: owners %q, want %q", when, got, want)
	}
	for _, mb := range mbs {
		if got, w := mb.m.Owned(), share(want, mb.id); !slices.Equal(got, w) {
			s.t.Fatalf("%s: %s owns %v, want %v", when, mb.id, got, w)
		}
		for _, p := range mb.m.Owned() {
			if !mb.m.Held(p) {
				s.t.Fatalf("%s: %s owns %d but does not hold it", when, mb.id, p)
			}
		}
	}
}
