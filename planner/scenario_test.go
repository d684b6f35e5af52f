package planner_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"rsc.io/script"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/scenario"
	"github.com/converge-pve/converge/planner"
	"github.com/converge-pve/converge/projector"
)

// TestScenarios runs the engine's scripted scenarios (testdata/*.txtar):
// journal events in, actions, documents and checkpoints out, time moved
// by the script. No server, no clock: each runs in milliseconds. The
// commands are listed by `help` in a script; see newHarness.
func TestScenarios(t *testing.T) {
	scenario.Run(t, "testdata/*.txtar", func(t *testing.T) map[string]script.Cmd { return newHarness(t).cmds() })
}

// harness is one scenario's world: an engine, the journal it folds (a
// sequence counter: events are folded as they are appended), the time,
// and the partitions the planner holds.
type harness struct {
	t       *testing.T
	e       *planner.Engine
	cfg     planner.Config
	now     time.Time
	seq     uint64
	pending uint64 // what the journal holds after the next fold
	lost    map[int]bool
	// outbox holds actions handed out and not yet published or refused.
	outbox []planner.Publish
	// lastAction is each guest's newest action in the journal (its id and
	// sequence), for results.
	lastAction map[int]planner.Publish
	snapshot   *projector.Snapshot
	// journal is every event folded, for restarts that fold the tail
	// after a checkpoint or the whole journal (rebuild, replay,
	// scenario_sign_test.go); guests are the vmids it names.
	journal []projector.Event
	guests  map[int]bool
	// docs are the newest documents flushed, per guest, and flushed the
	// cluster state with them: what the views hold
	// (scenario_planfile_test.go).
	docs    map[int]planner.Doc
	flushed *planner.Flush
}

var t0 = time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, now: t0, lost: map[int]bool{}, lastAction: map[int]planner.Publish{}, guests: map[int]bool{}}
	h.cfg = planner.DefaultConfig()
	h.cfg.Name, h.cfg.Owner = "planner@test", h
	h.cfg.Policy.Location = time.UTC // restart windows in the script's time
	return h
}

// Held implements planner.Owner.
func (h *harness) Held(p int) bool { return !h.lost[p] }

func (h *harness) cmds() map[string]script.Cmd {
	return map[string]script.Cmd{
		"config":    scenario.Cmd("set engine options before begin", "key=value...", h.config),
		"begin":     scenario.Cmd("start the engine: fold up to the journal's end is catching up", "", h.begin),
		"restart":   scenario.Cmd("a new engine restored from the last checkpoint (from the start if it refuses it), folds the journal after it", "", h.restart),
		"rebuild":   scenario.Cmd("converge rebuild: the checkpoint dropped, a new engine folds the whole journal", "", h.rebuild),
		"replay":    scenario.Cmd("converge replay: fold the whole journal with the engine's settings, print every guest's status planned now", "", h.replay),
		"states":    scenario.Cmd("print every guest's decision, as replay prints it", "", h.states),
		"signed":    scenario.Cmd("fold a desired event signed now by the test key KEY", "KEY VMID JSON", h.signed),
		"heartbeat": scenario.Cmd("fold an observer heartbeat read now", "[unreachable MESSAGE | incomplete | unread VMID...]", h.heartbeat),
		"desired":   scenario.Cmd("fold a desired event", "VMID JSON", h.desired),
		"observe":   scenario.Cmd("fold an observation read now (or at read_at=±D; after=SEQ: the journal it knew)", "VMID key=value...", h.observe),
		"result":    scenario.Cmd("fold a result of the guest's newest action", "VMID STATUS [class=C] [error=E] [upid=U] [observe key=value...]", h.result),
		"resync":    scenario.Cmd("fold a resync request", "", h.resync),
		"control":   scenario.Cmd("fold an operator's request by alice", "pause|resume|approve|release all|VMID...", h.control),
		"ledger":    scenario.Cmd("the limits ledger refuses VMID's handed-out action its claim KEY", "VMID KEY", h.ledger),
		"behind":    scenario.Cmd("the next folds see N events after them in the journal", "N", h.behind),
		"publish":   scenario.Cmd("the stream stores the handed-out actions; they are folded", "", h.publish),
		"refuse":    scenario.Cmd("the stream refuses VMID's handed-out action (its fence moved)", "VMID", h.refuse),
		"foreign":   scenario.Cmd("fold an action another planner published", "VMID OP", h.foreign),
		"tick":      scenario.Cmd("advance the time (default 250ms) and tick", "[DURATION]", h.tick),
		"advance":   scenario.Cmd("advance the time without a tick", "DURATION", h.advance),
		"prompt":    scenario.Cmd("advance the time (default 0) and flush if a prompt flush is due", "[DURATION]", h.prompt),
		"due":       scenario.Cmd("print when a prompt flush is due", "", h.due),
		"unwritten": scenario.Cmd("the view writer refused the guests' documents", "VMID...", h.unwritten),
		"lease":     scenario.Cmd("lose or win partitions (all: every one)", "lose|win P...|all", h.lease),
		"partition": scenario.Cmd("print the partition of a guest", "VMID", h.partition),
		"status":    scenario.Cmd("print a guest's decision", "VMID", h.status),
		"written":   scenario.Cmd("the last checkpoint was stored (or failed to be)", "[failed]", h.checkpointed),
		// scenario_addresses_test.go
		"addresses": scenario.Cmd("fold the guest agent's addresses of a guest, read now", "VMID IFACE=ADDR/PREFIX... | VMID unknown REASON", h.addresses),
		"view":      scenario.Cmd("print a guest's observation sequences, basis, in-flight action and addresses", "VMID", h.view),
	}
}

func (h *harness) config(args []string) (string, error) {
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		var err error
		switch k {
		case "observe-only":
			h.cfg.Policy.ObserveOnly = v != "false"
		case "restart":
			h.cfg.Policy.Restart = events.Restart(v)
		case "restart-window":
			h.cfg.Policy.RestartWindow = strings.ReplaceAll(v, "_", " ")
		case "node-concurrency":
			h.cfg.Limits.NodeConcurrencyUnlimited = v == "unlimited"
			if !h.cfg.Limits.NodeConcurrencyUnlimited {
				h.cfg.Limits.NodeConcurrency, err = strconv.Atoi(v)
			}
		case "guard-min":
			h.cfg.Limits.GuardMin, err = strconv.Atoi(v)
		case "allow-destroy":
			h.cfg.Policy.AllowDestroy = v != "false"
		case "clone-concurrency":
			h.cfg.Limits.CloneConcurrency, err = strconv.Atoi(v)
		case "create-rate":
			h.cfg.Limits.CreateRate, err = strconv.Atoi(v)
		case "max-guests":
			h.cfg.Limits.MaxGuests, err = strconv.Atoi(v)
		case "backoff":
			h.cfg.Policy.BackoffBase, err = time.ParseDuration(v)
		case "max-burst":
			h.cfg.Policy.MaxBurst, err = strconv.Atoi(v)
		case "checkpoint":
			h.cfg.CheckpointInterval, err = time.ParseDuration(v)
		case "create-pools":
			h.cfg.Policy.CreatePools = v != "false"
		case "snapshot-keep":
			h.cfg.Policy.SnapshotKeep, err = strconv.Atoi(v)
		case "trusted", "require-signed", "signature-window", "signing":
			err = h.signing(k, v)
		default:
			return "", fmt.Errorf("unknown option %q", k)
		}
		if err != nil {
			return "", err
		}
	}
	return "", nil
}

func (h *harness) begin([]string) (string, error) {
	e, err := planner.NewEngine(h.cfg)
	if err != nil {
		return "", err
	}
	h.e = e
	e.Begin(h.seq, h.now)
	return h.ready(), nil
}

func (h *harness) restart([]string) (string, error) {
	e, err := planner.NewEngine(h.cfg)
	if err != nil {
		return "", err
	}
	out, from := "", uint64(0)
	if h.snapshot != nil {
		if err := e.Restore(h.snapshot, h.now); err != nil {
			// As the planner's loop does: a checkpoint it cannot resume
			// from is dropped and the journal folded from the start.
			out = fmt.Sprintf("checkpoint refused: %v\n", err)
		} else {
			from = h.snapshot.Seq
		}
	}
	h.e, h.outbox = e, nil
	e.Begin(h.seq, h.now)
	h.foldJournal(from)
	return out + h.ready(), nil
}

// foldJournal folds the journal's events after seq into the engine, as
// a restarted planner follows the journal from its checkpoint.
func (h *harness) foldJournal(after uint64) {
	var tail []projector.Event
	for _, ev := range h.journal {
		if ev.Seq > after {
			tail = append(tail, ev) // copies: folding predecodes its own
		}
	}
	h.e.Fold(tail, h.pending, h.now)
}

// fold appends one event to the journal and folds it.
func (h *harness) fold(kind events.Kind, vmid int, hdr events.Header, body []byte) uint64 {
	h.seq++
	subject := events.ClusterSubject(kind, "pve")
	if vmid != 0 {
		subject = events.StoredSubject(kind, "pve", vmid, planner.DefaultPartitions)
	}
	ev := projector.Event{Seq: h.seq, Subject: subject, Header: hdr, Data: body, Time: h.now}
	h.journal = append(h.journal, ev)
	if vmid != 0 {
		h.guests[vmid] = true
	}
	h.e.Fold([]projector.Event{ev}, h.pending, h.now)
	return h.seq
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func (h *harness) heartbeat(args []string) (string, error) {
	// A complete pass that read the inventory after everything journalled
	// so far (unless "incomplete"): a desired guest it published nothing
	// for does not exist.
	hb := events.Heartbeat{Meta: events.NewMeta("observer@test", "", h.now), Cluster: "pve", Observer: "observer@test",
		Reachable: true, Interval: 10 * time.Second, AfterSeq: h.seq}
	switch {
	case len(args) > 0 && args[0] == "unreachable":
		hb.Reachable, hb.Error, hb.AfterSeq = false, strings.Join(args[1:], " "), 0
	case len(args) > 0 && args[0] == "incomplete":
		hb.AfterSeq = 0
	case len(args) > 0 && args[0] == "unread":
		for _, a := range args[1:] {
			id, err := strconv.Atoi(a)
			if err != nil {
				return "", err
			}
			hb.Unread = append(hb.Unread, id)
		}
	}
	h.fold(events.KindHeartbeat, 0, nil, mustJSON(hb))
	return h.ready(), nil
}

func vmidArg(args []string) (int, error) {
	if len(args) == 0 {
		return 0, fmt.Errorf("want a vmid")
	}
	return strconv.Atoi(args[0])
}

func (h *harness) desired(args []string) (string, error) {
	vmid, err := vmidArg(args)
	if err != nil {
		return "", err
	}
	hdr := events.Header{}
	hdr.Set(events.HeaderPublisher, "test")
	h.fold(events.KindDesired, vmid, hdr, []byte(strings.Join(args[1:], " ")))
	return h.ready(), nil
}

func (h *harness) observe(args []string) (string, error) {
	vmid, err := vmidArg(args)
	if err != nil {
		return "", err
	}
	o, err := h.observation(vmid, args[1:])
	if err != nil {
		return "", err
	}
	h.fold(events.KindObserved, vmid, nil, mustJSON(o))
	return h.ready(), nil
}

func (h *harness) result(args []string) (string, error) {
	vmid, err := vmidArg(args)
	if err != nil || len(args) < 2 {
		return "", fmt.Errorf("want VMID STATUS: %v", err)
	}
	a, ok := h.lastAction[vmid]
	if !ok {
		return "", fmt.Errorf("guest %d has no published action", vmid)
	}
	r := events.Result{Meta: events.NewMeta("executor@test", a.Action.CorrelationID, h.now), ActionID: a.Action.ID,
		VMID: vmid, Cluster: "pve", Op: a.Action.Op, Status: events.ResultStatus(args[1]), Executor: "executor@test"}
	rest := args[2:]
	for i, kv := range rest {
		if kv == "observe" {
			if r.Observed, err = h.observation(vmid, rest[i+1:]); err != nil {
				return "", err
			}
			r.Observed.Source = events.SourceExecutor
			break
		}
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "class":
			r.ErrorClass = events.ErrorClass(v)
		case "error":
			r.Error = v
		case "upid":
			r.UPID = v
		default:
			return "", fmt.Errorf("unknown result key %q", k)
		}
	}
	h.fold(events.KindResult, vmid, nil, mustJSON(r))
	return h.ready(), nil
}

func (h *harness) resync([]string) (string, error) {
	h.fold(events.KindControl, 0, nil, mustJSON(events.Control{Meta: events.NewMeta("test", "", h.now), Command: events.CommandResync}))
	return h.ready(), nil
}

func (h *harness) control(args []string) (string, error) {
	if len(args) < 2 {
		return "", fmt.Errorf("want COMMAND all|VMID...")
	}
	c := events.Control{Meta: events.NewMeta("alice", "", h.now), Command: args[0]}
	for _, a := range args[1:] {
		if a == "all" {
			c.All = true
			continue
		}
		id, err := strconv.Atoi(a)
		if err != nil {
			return "", err
		}
		c.VMIDs = append(c.VMIDs, id)
	}
	h.fold(events.KindControl, 0, nil, mustJSON(c))
	return h.ready(), nil
}

func (h *harness) ledger(args []string) (string, error) {
	vmid, err := vmidArg(args)
	if err != nil || len(args) != 2 {
		return "", fmt.Errorf("want VMID KEY: %v", err)
	}
	for i, p := range h.outbox {
		if p.Action.VMID != vmid {
			continue
		}
		for _, c := range p.Claims {
			if c.Key == args[1] {
				h.outbox = append(h.outbox[:i], h.outbox[i+1:]...)
				h.e.Refused(vmid, p.Action.ID, c, h.now)
				return "ledger refused " + p.Action.ID + "\n" + h.ready(), nil
			}
		}
		return "", fmt.Errorf("action %s claims no %s", p.Action.ID, args[1])
	}
	return "", fmt.Errorf("no handed-out action for %d", vmid)
}

func (h *harness) behind(args []string) (string, error) {
	n, err := strconv.ParseUint(strings.Join(args, ""), 10, 64)
	h.pending = n
	return "", err
}

// publish: the stream stores every handed-out action (each fence holds in
// the harness: it only refuses when told to), acknowledges it, and the
// engine folds it from the journal.
func (h *harness) publish([]string) (string, error) {
	var b strings.Builder
	out := h.outbox
	h.outbox = nil
	for _, p := range out {
		h.lastAction[p.Action.VMID] = p
		h.fold(events.KindAction, p.Action.VMID, nil, mustJSON(p.Action))
		h.e.Published(p.Action.VMID, p.Action.ID, false)
		b.WriteString(h.ready())
	}
	return b.String(), nil
}

func (h *harness) foreign(args []string) (string, error) {
	vmid, err := vmidArg(args)
	if err != nil || len(args) != 2 {
		return "", fmt.Errorf("want VMID OP: %v", err)
	}
	a := events.Action{Meta: events.NewMeta("planner@other", "", h.now), ID: fmt.Sprintf("other-%d", h.seq+1), VMID: vmid,
		Cluster: "pve", Node: "pve1", Kind: events.QEMU, Op: events.Op(args[1]), Reason: "another planner"}
	h.lastAction[vmid] = planner.Publish{Action: a}
	h.fold(events.KindAction, vmid, nil, mustJSON(a))
	return h.ready(), nil
}

func (h *harness) refuse(args []string) (string, error) {
	vmid, err := vmidArg(args)
	if err != nil {
		return "", err
	}
	for i, p := range h.outbox {
		if p.Action.VMID == vmid {
			h.outbox = append(h.outbox[:i], h.outbox[i+1:]...)
			h.e.PublishFailed(vmid, p.Action.ID, true, h.now)
			return "refused " + p.Action.ID + "\n" + h.ready(), nil
		}
	}
	return "", fmt.Errorf("no handed-out action for %d", vmid)
}

func (h *harness) tick(args []string) (string, error) {
	d := planner.DefaultFlushInterval
	if len(args) > 0 {
		var err error
		if d, err = time.ParseDuration(args[0]); err != nil {
			return "", err
		}
	}
	h.now = h.now.Add(d)
	h.e.Tick(h.now)
	return h.ready(), nil
}

func (h *harness) prompt(args []string) (string, error) {
	if len(args) > 0 {
		d, err := time.ParseDuration(args[0])
		if err != nil {
			return "", err
		}
		h.now = h.now.Add(d)
	}
	h.e.FlushPrompt(h.now)
	return h.ready(), nil
}

func (h *harness) unwritten(args []string) (string, error) {
	var ids []int
	for _, a := range args {
		id, err := strconv.Atoi(a)
		if err != nil {
			return "", err
		}
		ids = append(ids, id)
	}
	h.e.Unwritten(ids)
	return "", nil
}

func (h *harness) due([]string) (string, error) {
	at := h.e.FlushDue()
	if at.IsZero() {
		return "no prompt flush\n", nil
	}
	return fmt.Sprintf("prompt flush in %s\n", at.Sub(h.now)), nil
}

func (h *harness) advance(args []string) (string, error) {
	if len(args) != 1 {
		return "", fmt.Errorf("want a duration")
	}
	d, err := time.ParseDuration(args[0])
	h.now = h.now.Add(d)
	return "", err
}

func (h *harness) lease(args []string) (string, error) {
	if len(args) < 2 {
		return "", fmt.Errorf("want lose|win P...")
	}
	var ps []int
	if args[1] == "all" {
		for p := range planner.DefaultPartitions {
			ps = append(ps, p)
		}
	} else {
		for _, a := range args[1:] {
			p, err := strconv.Atoi(a)
			if err != nil {
				return "", err
			}
			ps = append(ps, p)
		}
	}
	switch args[0] {
	case "lose":
		for _, p := range ps {
			h.lost[p] = true
		}
		return "", nil
	case "win":
		for _, p := range ps {
			delete(h.lost, p)
		}
		h.e.Acquired(ps, h.now)
		return h.ready(), nil
	}
	return "", fmt.Errorf("lease %s: want lose or win", args[0])
}

func (h *harness) partition(args []string) (string, error) {
	vmid, err := vmidArg(args)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("partition %d\n", events.Partition("pve", vmid, planner.DefaultPartitions)), nil
}

func (h *harness) status(args []string) (string, error) {
	vmid, err := vmidArg(args)
	if err != nil {
		return "", err
	}
	d, ok := h.e.Decision(vmid)
	if !ok {
		return "not planned\n", nil
	}
	out := fmt.Sprintf("%s: %s\n", d.Status.Kind, d.Status.Reason)
	for _, s := range d.Steps {
		out += fmt.Sprintf("step %s: %s\n", s.Op, s.Reason)
	}
	if !d.Status.RetryAt.IsZero() {
		out += fmt.Sprintf("retry at +%s\n", d.Status.RetryAt.Sub(t0))
	}
	return out, nil
}

func (h *harness) checkpointed(args []string) (string, error) {
	var err error
	if len(args) > 0 && args[0] == "failed" {
		err = fmt.Errorf("object store unavailable")
	}
	h.e.CheckpointWritten(err)
	return "", nil
}
