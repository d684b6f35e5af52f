package planner

import (
	"slices"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/projector"
)

// Owner says which journal partitions this planner holds a lease on. The
// engine publishes actions and documents only for guests of partitions it
// holds; it asks before each publish and each flush.
type Owner interface {
	Held(partition int) bool
}

// Engine is the planner as a state machine: it takes inputs (journal
// events, ticks of its clock, lease changes, what became of its publishes
// and writes) and answers with [Ready], the work its I/O loop carries out.
// It does no I/O, reads no clock and starts no goroutine, so a script can
// drive it in microseconds (testdata/*.txtar). Its methods must be called
// from one goroutine. See the package documentation for the ordering rules.
type Engine struct {
	cfg  Config
	proj *projector.Projector

	// target is the journal's last sequence when the loop began: folding
	// up to it is catching up, and nothing is planned before.
	target   uint64
	caughtUp bool
	// stale is whether observations were stale at the last tick: a flip
	// replans every guest.
	stale    bool
	lastFull time.Time
	// sweep holds the guests of the periodic full pass in progress, the
	// first swept of them planned (sweep.go); idBuf is the vmid buffer
	// full passes reuse.
	sweep []int
	swept int
	idBuf []int

	decision decisions
	// counts and retries are kept with decision so that neither a tick nor
	// a flush walks every guest: at 10,000 guests that walk held up
	// planning for milliseconds four times a second.
	counts  map[StatusKind]int
	waiting map[string]int // guests per Status.Limit
	retries map[int]time.Time
	// awaiting holds guests whose action is handed out but not yet folded
	// (at most one in flight per guest).
	awaiting map[int]string
	// awaitingOp is the operation of each handed-out action: the guard
	// and the creation limits count them before they are folded.
	awaitingOp map[int]events.Op
	lim        limiter
	// slim is the storages' clone slots (Limits.CloneConcurrency),
	// tlim the container templates' (one clone at a time), kept like the
	// nodes' slots.
	slim, tlim limiter
	inHeads    map[string]bool // planning the guests first in line for these nodes
	// unseen are the guests with desired state and no observation yet,
	// planned again when the observer completes its next pass
	// (projector.View.Missing); lastPass is that pass's AfterSeq.
	unseen   map[int]bool
	lastPass uint64
	// deferred holds the guests folded while the engine was far behind the
	// journal, in the order first touched; see Fold.
	deferred      []int
	isDeferred    map[int]bool
	deferredSince time.Time

	// written is the signature of each guest's last document handed out:
	// a document is rewritten only when what status shows changed.
	written   map[int]docSig
	dirty     map[int]bool
	dirtyHigh int // the most guests dirty at a flush since dirty was made
	lastFlush time.Time
	// prompt: a dirty document shows a state a waiter stops on
	// (FlushDue).
	prompt bool

	// reported are the guests whose desired revision was reported
	// converged (Ready.Converged); fold takes a guest out when a desired
	// event becomes its revision. (A set, not each guest's revision in a
	// map: 23 B a guest less at 100,000, BenchmarkPlannerMemory.)
	reported vmidSet

	lastCkpt    time.Time
	lastCkptSeq uint64
	ckptBusy    bool

	out Ready
}

// Ready is the work an engine hands its loop. The loop carries it out in
// this order: publish each of Actions (fenced, see [Publish]) and report
// each outcome with [Engine.Published] or [Engine.PublishFailed]; hand
// Flush to the view writer, reporting documents it refused or failed to
// write with [Engine.Unwritten]; store Checkpoint and report with
// [Engine.CheckpointWritten]; join the partition group once CaughtUp.
type Ready struct {
	Actions    []Publish
	Flush      *Flush
	Checkpoint *projector.Snapshot
	// CaughtUp is set once, when the fold reaches the journal's end as it
	// stood at Begin and the first full pass has run.
	CaughtUp bool
	// Resync is set when a resync request was folded (a full pass ran).
	Resync bool
	// Acquired counts the guests planned because their partitions were
	// won (Engine.Acquired).
	Acquired int
	// Rewrite is set when every document was marked for rewriting.
	Rewrite bool
	// Unfolded are the events that could not be folded (skipped).
	Unfolded []Unfolded
	// Held are guests the mass-change guard has just started holding.
	Held []HeldNote
	// Converged are the desired revisions just converged (metrics).
	Converged []Convergence
}

// Convergence is a desired revision that reached its state (converged,
// or absent as desired): reported once per revision, by the planner that
// owns the guest, and only for revisions journalled after this engine's
// Begin, so that a restart's replay does not report old ones again.
type Convergence struct {
	VMID       int
	DesiredSeq uint64
	// Took is from the desired event's journal time to the plan that
	// found the guest done (the engine's now); never negative.
	Took time.Duration
}

// HeldNote is a guest newly held by the mass-change guard, for the log.
type HeldNote struct {
	VMID   int
	Reason string
}

// Empty reports whether there is nothing to do.
func (r *Ready) Empty() bool {
	return len(r.Actions) == 0 && r.Flush == nil && r.Checkpoint == nil && !r.CaughtUp && !r.Resync &&
		r.Acquired == 0 && !r.Rewrite && len(r.Unfolded) == 0 && len(r.Held) == 0 && len(r.Converged) == 0
}

// Publish is one action to publish on the guest's action subject with
// Nats-Msg-Id Action.ID (a replan of the same step after a restart is a
// duplicate) and the fence Nats-Expected-Last-Subject-Sequence
// ExpectLastSeq: the subject must still end at the action this plan saw.
//
// Claims, if any, must first be granted by the cluster's limits ledger
// (Entry{VMID, ID: Action.ID, After: ExpectLastSeq}), in order; an action
// refused one is not published, the claims granted before are withdrawn,
// and the refusal reported with [Engine.Refused].
type Publish struct {
	Action        events.Action
	ExpectLastSeq uint64
	Claims        []Claim
	// lead: a node task follows this action (a config write before its
	// guest's reboot). Ready hands these out first.
	lead bool
}

// Flush is a batch of guest documents to write, with the cluster state and
// the sequence they reflect.
type Flush struct {
	Docs  []Doc
	State projector.ClusterState
	Seq   uint64
	At    time.Time
	// Guests is how many guests the fold holds: each has a document once
	// every planner has flushed (what converge rebuild waits for).
	Guests int
}

// Doc is a guest's view and the decision made from it. The view is a copy
// the engine no longer touches.
type Doc struct {
	View     *projector.View
	Decision Decision
}

// Unfolded is an event the fold skipped, and why.
type Unfolded struct {
	Seq     uint64
	Subject string
	Err     error
}

// NewEngine checks cfg and returns an engine with an empty fold.
func NewEngine(cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	proj := projector.New(cfg.Cluster)
	proj.Partitions = cfg.Partitions // events that skipped the partition transform are not folded
	proj.Auth = cfg.Auth
	return &Engine{cfg: cfg, proj: proj,
		counts: map[StatusKind]int{}, waiting: map[string]int{}, retries: map[int]time.Time{},
		awaiting: map[int]string{}, awaitingOp: map[int]events.Op{}, lim: newLimiter(), slim: newLimiter(), tlim: newLimiter(), isDeferred: map[int]bool{}, written: map[int]docSig{}, dirty: map[int]bool{},
		unseen: map[int]bool{}, inHeads: map[string]bool{},
		// Until a heartbeat is folded, observations count as stale: the
		// first one flips this and replans every guest it blocked.
		stale: true}, nil
}

// Config returns the validated configuration.
func (e *Engine) Config() Config { return e.cfg }

// Restore resumes from a checkpoint taken at now (before Begin). It
// refuses one folded under other signing settings than Config.Auth
// (projector.ErrSigningChanged): the journal is then folded from the
// start, so that every desired event is judged by the settings in force.
func (e *Engine) Restore(s *projector.Snapshot, now time.Time) error {
	p, err := projector.Restore(s, e.cfg.Cluster, e.cfg.Auth)
	if err != nil {
		return err
	}
	p.Partitions = e.cfg.Partitions
	e.proj = p
	for _, v := range p.Views {
		if v.InFlight != nil {
			e.lim.setBusy(v.VMID, actionNodes(v.InFlight.Node, v.InFlight.Op, v.InFlight.Migrate)...)
			e.slim.setBusy(v.VMID, storageSlot(v.InFlight))
			e.tlim.setBusy(v.VMID, templateSlot(v.InFlight))
		}
	}
	e.lastCkptSeq, e.lastCkpt = s.Seq, now
	return nil
}

// Begin tells the engine where the journal ended when the loop started:
// folding up to target is catching up. An empty journal, or a checkpoint
// already there, is caught up at once.
func (e *Engine) Begin(target uint64, now time.Time) {
	e.target = target
	if target == 0 || e.proj.LastSeq >= target {
		e.catchUp(now)
	}
}

// LastSeq is the sequence of the last event folded.
func (e *Engine) LastSeq() uint64 { return e.proj.LastSeq }

// Guests is the number of guests the fold knows.
func (e *Engine) Guests() int { return len(e.proj.Views) }

// LimitNames are the limits a pending guest may wait for (Status.Limit).
var LimitNames = []string{"node", "storage", "create_rate", "max_guests"}

// Waiting returns how many guests wait for each limit.
func (e *Engine) Waiting() map[string]int {
	out := make(map[string]int, len(e.waiting))
	for k, n := range e.waiting {
		out[k] = n
	}
	return out
}

// Counts returns how many guests are in each state (a copy).
func (e *Engine) Counts() map[StatusKind]int {
	out := make(map[StatusKind]int, len(e.counts))
	for k, n := range e.counts {
		out[k] = n
	}
	return out
}

// Decision returns the guest's last decision; false if it was never
// planned.
func (e *Engine) Decision(vmid int) (Decision, bool) {
	return e.decision.get(vmid)
}

// Dirty is the number of guests whose document changed since it was last
// handed out.
func (e *Engine) Dirty() int { return len(e.dirty) }

// Ready returns the work accumulated since the last call, and forgets it.
func (e *Engine) Ready() Ready {
	r := e.out
	e.out = Ready{}
	// A node's API workers serve converge's calls as they come: the writes
	// a reboot waits on are published first, so that they are first at
	// the node, ahead of writes nothing waits on (the order of different
	// guests' actions means nothing else).
	slices.SortStableFunc(r.Actions, func(a, b Publish) int {
		switch {
		case a.lead == b.lead:
			return 0
		case a.lead:
			return -1
		}
		return 1
	})
	if r.Flush != nil {
		r.Flush.Docs = newestDocs(r.Flush.Docs)
	}
	return r
}

// newestDocs keeps each guest's last document (two flushes may have met
// in one Ready), ordered by vmid.
func newestDocs(docs []Doc) []Doc {
	seen := make(map[int]bool, len(docs))
	out := docs[:0:0]
	for i := len(docs) - 1; i >= 0; i-- {
		if id := docs[i].View.VMID; !seen[id] {
			seen[id] = true
			out = append(out, docs[i])
		}
	}
	slices.SortFunc(out, func(a, b Doc) int { return a.View.VMID - b.View.VMID })
	return out
}
