package views

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/planner"
)

// Writer writes a planner's documents (planner.Flush) to a Store on a
// goroutine of its own, one flush at a time, so that encoding and writing
// never hold up planning. Documents whose write failed come back on
// Failed, to be handed out again.
type Writer struct {
	store   Store
	cluster string
	planner string
	policy  *planner.Policy
	log     zerolog.Logger

	batches chan *planner.Flush
	failed  chan int
	writing atomic.Int64
	started bool
	done    chan struct{}
}

// NewWriter returns a writer of cluster's documents for the planner named
// plannerName, which plans with policy. Start starts it.
func NewWriter(store Store, cluster, plannerName string, policy planner.Policy, log zerolog.Logger) *Writer {
	return &Writer{store: store, cluster: cluster, planner: plannerName, policy: &policy, log: log,
		batches: make(chan *planner.Flush, 1), failed: make(chan int, 4096), done: make(chan struct{})}
}

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
			b, err := json.Marshal(GuestDoc{View: d.View, Status: d.Decision.Status, Next: d.Decision.Steps, UpdatedAt: f.At})
			if err != nil {
				w.log.Error().Err(err).Int("vmid", id).Msg("encode view")
				continue
			}
			fut, err := w.store.PutAsync(GuestKey(w.cluster, id), b)
			if err != nil {
				w.fail(id)
				continue
			}
			ps = append(ps, pending{id, fut})
		}
		if b, err := json.Marshal(ClusterDoc{State: f.State, Seq: f.Seq, UpdatedAt: f.At, Planner: w.planner, Policy: w.policy}); err == nil {
			_, _ = w.store.PutAsync(ClusterKey(w.cluster), b)
		}
		// Futures time out on their own: no deadline needed here.
		for _, p := range ps {
			if _, err := p.f.Wait(context.Background()); err != nil {
				w.log.Warn().Err(err).Int("vmid", p.vmid).Msg("materialise view failed; will retry")
				w.fail(p.vmid)
			}
		}
		w.writing.Add(-int64(len(f.Docs)))
	}
}

func (w *Writer) fail(vmid int) {
	select {
	case w.failed <- vmid:
	default: // rewritten on its next change
	}
}
