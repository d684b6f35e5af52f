package views_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/internal/clock/clocktest"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
	"github.com/converge-pve/converge/projector"
)

// natsMaxPayload is the NATS server's default message limit.
const natsMaxPayload = 1 << 20

// memStore is a views.Store in memory that refuses what NATS refuses (a
// value over the max payload) and, when failing is set, everything.
type memStore struct {
	mu      sync.Mutex
	vals    map[string][]byte
	puts    map[string]int
	failing bool
}

type doneFuture struct{ err error }

func (d doneFuture) Poll() (journal.Ack, error, bool)          { return journal.Ack{}, d.err, true }
func (d doneFuture) Wait(context.Context) (journal.Ack, error) { return journal.Ack{}, d.err }

func newMemStore() *memStore { return &memStore{vals: map[string][]byte{}, puts: map[string]int{}} }

func (m *memStore) PutAsync(key string, value []byte) (journal.Future, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.puts[key]++
	if m.failing {
		return doneFuture{errors.New("nats: timeout")}, nil
	}
	if len(value) > natsMaxPayload {
		return nil, errors.New("nats: maximum payload exceeded")
	}
	m.vals[key] = append([]byte(nil), value...)
	return doneFuture{}, nil
}

func (m *memStore) count(key string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.puts[key]
}

func (m *memStore) Get(_ context.Context, key string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.vals[key], nil
}
func (m *memStore) Keys(context.Context, string) ([]string, error) { return nil, nil }
func (m *memStore) Watch(context.Context, string, func(string, []byte)) (<-chan struct{}, error) {
	return nil, errors.New("not here")
}
func (m *memStore) Created(context.Context) (time.Time, bool, error) { return t0, true, nil }
func (m *memStore) Provision(context.Context) error                  { return nil }
func (m *memStore) Drop(context.Context) (bool, error)               { return false, nil }

// drain returns the guests the writer handed back, without waiting.
func drain(w *views.Writer) []int {
	var ids []int
	for {
		select {
		case id := <-w.Failed():
			ids = append(ids, id)
		default:
			return ids
		}
	}
}

// hugeRejection is a guest whose rejection reason and status are 4 MB,
// as an uncapped reason for 70,000 unknown fields was.
func hugeRejection() planner.Doc {
	reason := strings.Repeat("f12345: unknown field (not in desired schema version 1); ", 70_000)
	v := &projector.View{VMID: 101, Cluster: "pve", Seq: 9, Rejected: &projector.Rejection{Seq: 9, Reason: reason, Publisher: "p"}}
	return planner.Doc{View: v, Decision: planner.Decision{Status: planner.Status{Kind: planner.Rejected, Reason: reason}}}
}

// TestWriterBoundsDocuments: a document over views.MaxDocBytes is written
// once, cut down and marked truncated, with its status intact; before, it
// exceeded the NATS payload limit and came back to be rewritten forever.
func TestWriterBoundsDocuments(t *testing.T) {
	st := newMemStore()
	clk := clocktest.New(t0)
	w := views.NewWriter(st, "pve", "planner@test", planner.DefaultPolicy(), clk, zerolog.Nop())
	w.Start()
	if !w.Write(&planner.Flush{Docs: []planner.Doc{hugeRejection()}, Seq: 9, At: t0}) {
		t.Fatal("an idle writer refused a flush")
	}
	w.Close(30 * time.Second)
	if failed := drain(w); len(failed) != 0 {
		t.Fatalf("documents handed back for rewriting: %v", failed)
	}
	if n := st.count(views.GuestKey("pve", 101)); n != 1 {
		t.Fatalf("%d writes of the document, want 1", n)
	}
	b, _ := st.Get(context.Background(), views.GuestKey("pve", 101))
	if len(b) == 0 || len(b) > views.MaxDocBytes {
		t.Fatalf("document of %d bytes, want 1..%d", len(b), views.MaxDocBytes)
	}
	var g views.GuestDoc
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if !g.Truncated || g.Status.Kind != planner.Rejected || g.View == nil || g.View.VMID != 101 || g.View.Rejected == nil || g.View.Rejected.Seq != 9 {
		t.Fatalf("document %.400s", b)
	}
	if !strings.HasPrefix(g.Status.Reason, "f12345: unknown field") {
		t.Fatalf("status reason %.200q, want its start kept", g.Status.Reason)
	}
}

// TestWriterFailureIsLoggedOnceAndBacksOff: a document the store keeps
// refusing is logged once, counted, and handed back for rewriting only
// after a backoff that grows, never at every flush.
func TestWriterFailureIsLoggedOnceAndBacksOff(t *testing.T) {
	st := newMemStore()
	st.failing = true
	clk := clocktest.New(t0)
	var logs bytes.Buffer
	w := views.NewWriter(st, "pve", "planner@test", planner.DefaultPolicy(), clk, zerolog.New(&logs))
	w.Start()
	defer w.Close(30 * time.Second)
	d := hugeRejection()
	d.View.Rejected.Reason, d.Decision.Status.Reason = "short", "short"
	write := func() {
		t.Helper()
		if !w.Write(&planner.Flush{Docs: []planner.Doc{d}, Seq: 9, At: t0}) {
			t.Fatal("writer busy")
		}
		for w.Writing() > 0 { // the writer's goroutine finishes the flush
			runtime.Gosched()
		}
	}
	handedBack := 0
	for round := range 6 {
		write()
		if ids := drain(w); len(ids) != 0 {
			t.Fatalf("round %d: handed back at once: %v", round, ids)
		}
		// Nothing comes back before the backoff, then exactly once.
		clk.Advance(views.WriteBackoff(round+1) - time.Millisecond)
		if ids := drain(w); len(ids) != 0 {
			t.Fatalf("round %d: handed back before %s", round, views.WriteBackoff(round+1))
		}
		clk.Advance(time.Millisecond)
		ids := drain(w)
		handedBack += len(ids)
		if len(ids) != 1 || ids[0] != 101 {
			t.Fatalf("round %d: handed back %v after the backoff", round, ids)
		}
	}
	if handedBack != 6 || st.count(views.GuestKey("pve", 101)) != 6 {
		t.Fatalf("%d writes, %d hand-backs", st.count(views.GuestKey("pve", 101)), handedBack)
	}
	if n := strings.Count(logs.String(), "not written"); n != 1 {
		t.Fatalf("%d log lines about the failure, want 1:\n%s", n, logs.String())
	}
	if w.Failures() != 6 || w.Unwritten() != 1 {
		t.Fatalf("failures %d, unwritten %d", w.Failures(), w.Unwritten())
	}
	if views.WriteBackoff(6) <= views.WriteBackoff(1) || views.WriteBackoff(100) > 256*time.Second {
		t.Fatalf("backoff %s .. %s", views.WriteBackoff(1), views.WriteBackoff(100))
	}
	// Once the store takes it again, the guest counts as written.
	st.mu.Lock()
	st.failing = false
	st.mu.Unlock()
	write()
	if w.Unwritten() != 0 {
		t.Fatalf("unwritten %d after a good write", w.Unwritten())
	}
}
