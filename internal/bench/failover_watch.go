package bench

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/events"
)

// watchAction is one action as the journal has it, with its results.
type watchAction struct {
	vmid, partition int
	at              time.Time // stored (the stream's timestamp)
	results         []watchResult
}

type watchResult struct {
	executor string
	status   events.ResultStatus
	at       time.Time
}

// final is when the action's first final result was stored (zero: none).
func (a *watchAction) final() time.Time {
	for _, r := range a.results {
		if r.status.Final() {
			return r.at
		}
	}
	return time.Time{}
}

// failoverWatch follows the journal's actions and results (an ordered
// consumer: every one, with the time the stream stored it) and the
// simulator's mutating calls (with the time it received them). All times
// are this machine's clock: the server and the simulator run in the
// bench's process.
type failoverWatch struct {
	partitions int
	mu         sync.Mutex
	actions    map[string]*watchAction
	// results of actions not (yet) seen, by action id: the ordered
	// consumer delivers in stream order, so this stays empty, but a
	// result is never dropped.
	orphans   map[string][]watchResult
	mutations []mutation
}

func newFailoverWatch(partitions int) *failoverWatch {
	return &failoverWatch{partitions: partitions, actions: map[string]*watchAction{}, orphans: map[string][]watchResult{}}
}

func (w *failoverWatch) onMutation(m mutation) {
	w.mu.Lock()
	w.mutations = append(w.mutations, m)
	w.mu.Unlock()
}

// start consumes the stream's actions and results until ctx ends.
func (w *failoverWatch) start(ctx context.Context, s jetstream.Stream) (jetstream.ConsumeContext, error) {
	c, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{events.Prefix + "." + string(events.KindAction) + ".>", events.Prefix + "." + string(events.KindResult) + ".>"}})
	if err != nil {
		return nil, err
	}
	return c.Consume(w.onMsg)
}

func (w *failoverWatch) onMsg(m jetstream.Msg) {
	md, err := m.Metadata()
	if err != nil {
		return
	}
	si, err := events.ParseSubject(m.Subject())
	if err != nil {
		return
	}
	switch si.Kind {
	case events.KindAction:
		a, err := events.Decode[events.Action](m.Data())
		if err != nil || a.Op == events.OpHold {
			return
		}
		w.mu.Lock()
		wa := &watchAction{vmid: a.VMID, partition: events.Partition(events.DefaultCluster, a.VMID, w.partitions), at: md.Timestamp}
		wa.results, w.orphans[a.ID] = w.orphans[a.ID], nil
		delete(w.orphans, a.ID)
		w.actions[a.ID] = wa
		w.mu.Unlock()
	case events.KindResult:
		r, err := events.Decode[events.Result](m.Data())
		if err != nil {
			return
		}
		wr := watchResult{executor: r.Executor, status: r.Status, at: md.Timestamp}
		w.mu.Lock()
		if a := w.actions[r.ActionID]; a != nil {
			a.results = append(a.results, wr)
		} else {
			w.orphans[r.ActionID] = append(w.orphans[r.ActionID], wr)
		}
		w.mu.Unlock()
	}
}

// startedBy counts the actions executor has journalled a "started" result
// for and no final one: its tasks in flight.
func (w *failoverWatch) startedBy(executor string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, a := range w.actions {
		started := false
		for _, r := range a.results {
			started = started || (r.status == events.ResultStarted && r.executor == executor)
		}
		if started && a.final().IsZero() {
			n++
		}
	}
	return n
}

// resumeProgress is what the journal shows of a kill so far: when each
// action the killed executor left unfinished (stored before the kill, in
// a partition it held, not final before it) first had a survivor's
// result. done is whether every one has. The set is recomputed each time,
// so an action the consumer delivers late still counts.
func (w *failoverWatch) resumeProgress(victim string, held map[int]bool, at time.Time) (k KillTimes, done bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	done = true
	for _, a := range w.actions {
		if f := a.final(); !held[a.partition] || !a.at.Before(at) || (!f.IsZero() && !f.After(at)) {
			continue
		}
		var survivor time.Time
		startedByVictim := false
		for _, r := range a.results {
			if r.executor != victim && r.at.After(at) && (survivor.IsZero() || r.at.Before(survivor)) {
				survivor = r.at
			}
			startedByVictim = startedByVictim || (r.executor == victim && r.status == events.ResultStarted)
		}
		k.Open++
		if startedByVictim {
			k.Started++
		}
		if survivor.IsZero() {
			done = false
		} else {
			k.Resume = max(k.Resume, survivor.Sub(at))
		}
	}
	k.Executor, k.Held = victim, len(held)
	return k, done
}

// quiet says whether every action seen has a final result.
func (w *failoverWatch) quiet() (open int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, a := range w.actions {
		if a.final().IsZero() {
			open++
		}
	}
	return open
}

// auditCounts are what audit finds.
type auditCounts struct {
	// duplicates: calls an action had already made and that took effect
	// again (a 2xx answer); refused: such repeats the simulator refused
	// (e.g. a config write whose digest no longer matched), which
	// changed nothing.
	duplicates, refused        int
	handoffs, spurious         int
	actions, mutations, orphan int
}

// audit counts duplicate tasks and handoffs. A guest's actions run one at
// a time (the planner publishes a guest's next action only after the
// previous one's final result), so each mutating call the simulator
// received belongs to the guest's newest action stored before it; an
// action that received the same call (method and path) twice is a
// duplicate task. A handoff is an action with results of two executors;
// it is spurious unless the earlier one was killed.
func (w *failoverWatch) audit(killed map[string]bool) auditCounts {
	w.mu.Lock()
	defer w.mu.Unlock()
	var c auditCounts
	type stamped struct {
		id string
		at time.Time
	}
	byGuest := map[int][]stamped{}
	for id, a := range w.actions {
		byGuest[a.vmid] = append(byGuest[a.vmid], stamped{id, a.at})
		seen := map[string]bool{}
		var order []string
		for _, r := range a.results {
			if !seen[r.executor] {
				seen[r.executor] = true
				order = append(order, r.executor)
			}
		}
		if len(order) > 1 {
			c.handoffs++
			if !killed[order[0]] {
				c.spurious++
			}
		}
	}
	for _, l := range byGuest {
		sort.Slice(l, func(i, j int) bool { return l[i].at.Before(l[j].at) })
	}
	calls := map[string]int{}
	for _, m := range w.mutations {
		l := byGuest[m.vmid]
		i := sort.Search(len(l), func(i int) bool { return l[i].at.After(m.at) }) - 1
		if i < 0 {
			c.orphan++ // before any action of the guest: not an action's
			continue
		}
		key := l[i].id + " " + m.method + " " + mutationKind(m.path, m.vmid)
		calls[key]++
		if calls[key] > 1 {
			if m.status/100 == 2 {
				c.duplicates++
			} else {
				c.refused++
			}
		}
	}
	c.actions, c.mutations = len(w.actions), len(w.mutations)
	return c
}

// mutationKind is a mutating call's path after the guest's vmid, e.g.
// "status/start" or "config".
func mutationKind(path string, vmid int) string {
	if _, after, ok := strings.Cut(path, "/"+strconv.Itoa(vmid)+"/"); ok {
		return after
	}
	return path
}
