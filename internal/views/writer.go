package views

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/internal/clock"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/planner"
	"github.com/converge-pve/converge/projector"
)

// Writer writes a planner's documents (planner.Flush) to a Store on a
// goroutine of its own, one flush at a time, so that encoding and writing
// never hold up planning. Documents are bounded (MaxDocBytes). A document
// whose write failed comes back on Failed, to be handed out again, after a
// backoff that grows with each failure in a row (WriteBackoff): a store
// that keeps refusing costs a write per guest every few minutes, not one
// per flush. The first failure of a guest's run is logged, the rest only
// counted (Failures, Unwritten).
type Writer struct {
	store   Store
	cluster string
	planner string
	policy  *planner.Policy
	limits  *planner.Limits
	clk     clock.Clock
	log     zerolog.Logger

	batches chan *planner.Flush
	failed  chan int
	writing atomic.Int64
	started bool
	done    chan struct{}

	failures  atomic.Int64
	truncated atomic.Int64
	mu        sync.Mutex
	streak    map[int]int // failures in a row, by guest
}

// NewWriter returns a writer of cluster's documents for the planner named
// plannerName, which plans with policy; clk times the backoff of failed
// writes. Start starts it.
func NewWriter(store Store, cluster, plannerName string, policy planner.Policy, clk clock.Clock, log zerolog.Logger) *Writer {
	return &Writer{store: store, cluster: cluster, planner: plannerName, policy: &policy, clk: clock.Or(clk), log: log,
		batches: make(chan *planner.Flush, 1), failed: make(chan int, 4096), done: make(chan struct{}), streak: map[int]int{}}
}

// PublishLimits has the cluster document carry the limits the planner
// applies (call it before Start).
func (w *Writer) PublishLimits(l planner.Limits) { w.limits = &l }

// Start starts writing, on a goroutine of its own; call it once, from the
// goroutine that will call Close.
func (w *Writer) Start() {
	w.started = true
	go w.run()
}

// Write hands a flush over. It returns false, taking nothing, while the
// writer is still busy with the previous flush: the caller keeps those
// documents for a later one.
func (w *Writer) Write(f *planner.Flush) bool {
	w.writing.Add(int64(len(f.Docs)))
	select {
	case w.batches <- f:
		return true
	default:
		w.writing.Add(-int64(len(f.Docs)))
		return false
	}
}

// Failed delivers the guests whose document was not written.
func (w *Writer) Failed() <-chan int { return w.failed }

// Writing is the number of documents handed over and not yet written.
func (w *Writer) Writing() int { return int(w.writing.Load()) }

// Failures counts the document writes that failed since start.
func (w *Writer) Failures() int { return int(w.failures.Load()) }

// Unwritten is the number of guests whose last document write failed.
func (w *Writer) Unwritten() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.streak)
}

// Truncated counts the documents written cut down to MaxDocBytes.
func (w *Writer) Truncated() int { return int(w.truncated.Load()) }

// WriteBackoff is how long a guest whose document failed n times in a row
// waits before it is handed back: 1 s, doubling, at most 256 s.
func WriteBackoff(n int) time.Duration {
	return time.Second << min(max(n-1, 0), 8) // 256 s
}

// Close lets the flush in hand finish, for at most timeout.
func (w *Writer) Close(timeout time.Duration) {
	close(w.batches)
	if !w.started {
		return
	}
	select {
	case <-w.done:
	case <-time.After(timeout):
	}
}

func (w *Writer) run() {
	defer close(w.done)
	type pending struct {
		vmid int
		f    journal.Future
	}
	for f := range w.batches {
		var ps []pending
		for _, d := range f.Docs {
			id := d.View.VMID
			doc := GuestDoc{View: d.View, Status: d.Decision.Status, Next: d.Decision.Steps, UpdatedAt: f.At}
			b, cut, err := encodeBounded(doc, func() any { return minimalGuest(doc) })
			if err != nil {
				w.log.Error().Err(err).Int("vmid", id).Msg("encode view")
				continue
			}
			if cut {
				w.truncated.Add(1)
				w.log.Warn().Int("vmid", id).Int("max_bytes", MaxDocBytes).Msg("guest document too large; written cut down (marked truncated)")
			}
			fut, err := w.store.PutAsync(GuestKey(w.cluster, id), b)
			if err != nil {
				w.fail(id, err)
				continue
			}
			ps = append(ps, pending{id, fut})
		}
		cd := ClusterDoc{State: f.State, Seq: f.Seq, Guests: f.Guests, UpdatedAt: f.At, Planner: w.planner, Policy: w.policy, Limits: w.limits}
		if b, _, err := encodeBounded(cd, func() any {
			return ClusterDoc{State: projector.ClusterState{Cluster: f.State.Cluster, HeartbeatAt: f.State.HeartbeatAt, Reachable: f.State.Reachable},
				Seq: f.Seq, Guests: f.Guests, UpdatedAt: f.At, Planner: cutString(w.planner), Policy: w.policy, Limits: w.limits}
		}); err == nil {
			_, _ = w.store.PutAsync(ClusterKey(w.cluster), b)
		}
		// Futures time out on their own: no deadline needed here.
		for _, p := range ps {
			if _, err := p.f.Wait(context.Background()); err != nil {
				w.fail(p.vmid, err)
			} else {
				w.written(p.vmid)
			}
		}
		w.writing.Add(-int64(len(f.Docs)))
	}
}

// fail counts a failed write and hands the guest back after its backoff;
// only the first failure of a run is logged.
func (w *Writer) fail(vmid int, err error) {
	w.failures.Add(1)
	w.mu.Lock()
	w.streak[vmid]++
	n := w.streak[vmid]
	w.mu.Unlock()
	if n == 1 {
		w.log.Warn().Err(err).Int("vmid", vmid).Msg("guest document not written; retrying with backoff (logged once until it is written)")
	}
	w.clk.AfterFunc(WriteBackoff(n), func() {
		select {
		case w.failed <- vmid:
		default: // rewritten on its next change
		}
	})
}

// written ends a guest's run of failures.
func (w *Writer) written(vmid int) {
	w.mu.Lock()
	n, ok := w.streak[vmid]
	delete(w.streak, vmid)
	w.mu.Unlock()
	if ok {
		w.log.Info().Int("vmid", vmid).Int("failures", n).Msg("guest document written again")
	}
}
