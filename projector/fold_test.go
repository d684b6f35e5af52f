package projector_test

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/projector"
)

func TestDesiredFold(t *testing.T) {
	cases := []struct {
		name        string
		header      []string
		publisher   string
		correlation string
	}{
		{"no headers", nil, "unknown", "desired-pve-101-5"},
		{"publisher and correlation", []string{events.HeaderPublisher, "billing", events.HeaderCorrelationID, "order-9"}, "billing", "order-9"},
		{"schema 1 explicit", []string{events.HeaderSchema, "1", events.HeaderPublisher, "cli"}, "cli", "desired-pve-101-5"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := projector.New("pve")
			ch := p.Apply(desiredEv(5, 101, `{"vmid":101,"power":"running","cores":2}`, hdr(c.header...)))
			if ch.Err != nil || ch.View == nil || ch.Cluster || ch.Resync {
				t.Fatalf("change %+v", ch)
			}
			v := p.Views[101]
			if ch.View != v {
				t.Fatal("Change.View is not the projector's view")
			}
			if v.Desired == nil || *v.Desired.Power != events.PowerRunning || *v.Desired.Cores != 2 {
				t.Fatalf("desired %+v", v.Desired)
			}
			if v.DesiredSeq != 5 || !v.DesiredAt.Equal(at(5)) || v.Seq != 5 || p.LastSeq != 5 {
				t.Errorf("DesiredSeq %d DesiredAt %s Seq %d LastSeq %d", v.DesiredSeq, v.DesiredAt, v.Seq, p.LastSeq)
			}
			if v.Publisher != c.publisher || v.CorrelationID != c.correlation {
				t.Errorf("publisher %q correlation %q, want %q %q", v.Publisher, v.CorrelationID, c.publisher, c.correlation)
			}
			if v.Rejected != nil {
				t.Errorf("rejected %+v", v.Rejected)
			}
			if v.VMID != 101 || v.Cluster != "pve" {
				t.Errorf("view identity %d/%s", v.VMID, v.Cluster)
			}
		})
	}
}

func TestDesiredRejection(t *testing.T) {
	cases := []struct {
		name   string
		data   string
		header []string
		reason string
	}{
		{"unknown field", `{"vmid":101,"cpu":2}`, nil, "cpu: unknown field"},
		{"out of range", `{"vmid":101,"cores":0}`, nil, "cores: must be at least 1"},
		{"vmid mismatch with subject", `{"vmid":102,"power":"running"}`, nil, "vmid: body says 102 but the subject is for 101"},
		{"bad JSON", `{"vmid":`, nil, "not valid JSON"},
		{"unsupported schema header", `{"vmid":101,"power":"stopped"}`, []string{events.HeaderSchema, "2"}, `unsupported schema version "2"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := projector.New("pve")
			good := `{"vmid":101,"power":"running"}`
			applyAll(t, p, desiredEv(1, 101, good, hdr(events.HeaderPublisher, "a", events.HeaderCorrelationID, "c-1")))
			before := *p.Views[101]

			ch := p.Apply(desiredEv(2, 101, c.data, hdr(append([]string{events.HeaderPublisher, "mallory"}, c.header...)...)))
			if ch.Err != nil || ch.View == nil {
				t.Fatalf("a rejection is a fold, not a fold error: %+v", ch)
			}
			v := p.Views[101]
			if v.Rejected == nil {
				t.Fatal("invalid desired event not recorded as rejected")
			}
			r := v.Rejected
			if r.Seq != 2 || r.Publisher != "mallory" || !r.At.Equal(at(2)) || !strings.Contains(r.Reason, c.reason) {
				t.Errorf("rejection %+v, want seq 2 by mallory saying %q", r, c.reason)
			}
			// The previous desired state stands; nothing else moved.
			if v.Desired != before.Desired || v.DesiredSeq != 1 || v.Publisher != "a" || v.CorrelationID != "c-1" {
				t.Errorf("rejection changed the desired state: %+v", v)
			}
			// A later valid event clears the rejection.
			applyAll(t, p, desiredEv(3, 101, `{"vmid":101,"power":"stopped"}`, nil))
			if v.Rejected != nil || v.DesiredSeq != 3 || *v.Desired.Power != events.PowerStopped || v.Publisher != "unknown" {
				t.Errorf("after a valid event: rejected %+v, desired seq %d, publisher %q", v.Rejected, v.DesiredSeq, v.Publisher)
			}
		})
	}
	t.Run("rejection before any valid desired", func(t *testing.T) {
		p := projector.New("pve")
		applyAll(t, p, desiredEv(1, 300, `{"vmid":300,"power":"on"}`, nil))
		v := p.Views[300]
		if v.Desired != nil || v.DesiredSeq != 0 || v.Rejected == nil || v.Rejected.Publisher != "unknown" {
			t.Fatalf("view %+v", v)
		}
	})
}

func TestUnstampedObservationsOrderedByReadAt(t *testing.T) {
	p := projector.New("pve")
	newer := observed(101, at(100), "running")
	older := observed(101, at(50), "stopped")
	late := func(seq uint64, o *events.Observed) projector.Event {
		ev := observedEv(seq, o)
		ev.Time = at(200) // stored after every read
		return ev
	}
	applyAll(t, p, late(10, newer))
	v := p.Views[101]
	if v.Observed.Status != "running" || v.ObservedSeq != 10 || v.ObservedEventSeq != 10 || v.BasisSeq() != 10 {
		t.Fatalf("after first read: %+v", v)
	}
	// An older read published later (a slow observer) does not roll back.
	applyAll(t, p, late(11, older))
	if v.Observed.Status != "running" || v.ObservedSeq != 10 {
		t.Errorf("older read replaced a newer one: status %s seq %d", v.Observed.Status, v.ObservedSeq)
	}
	if v.ObservedEventSeq != 11 || v.BasisSeq() != 11 || v.Seq != 11 {
		t.Errorf("ObservedEventSeq %d BasisSeq %d Seq %d, want 11", v.ObservedEventSeq, v.BasisSeq(), v.Seq)
	}
	// A read at the same instant is not older: it replaces.
	same := observed(101, at(100), "paused")
	applyAll(t, p, late(12, same))
	if v.Observed.Status != "paused" || v.ObservedSeq != 12 {
		t.Errorf("same-instant read: status %s seq %d", v.Observed.Status, v.ObservedSeq)
	}
	// Gone is an observation like any other.
	gone := &events.Observed{VMID: 101, Cluster: "pve", Exists: false, ReadAt: at(150), Source: events.SourceObserver}
	applyAll(t, p, late(13, gone))
	if v.Observed.Exists || v.ObservedSeq != 13 {
		t.Errorf("gone not adopted: %+v", v.Observed)
	}
}

// Reads are ordered by the journal, not by the readers' clocks: an
// observer whose clock runs ahead must not make an executor's read-back
// look old (the planner re-planned from the stale view thousands of times).
func TestObservationsOrderedByJournal(t *testing.T) {
	p := projector.New("pve")
	skew := 20 * time.Second
	first := observed(101, at(10).Add(skew), "stopped")
	first.AfterSeq = 9
	applyAll(t, p, desiredEv(5, 101, `{"vmid":101,"power":"running"}`, nil), observedEv(10, first),
		actionEv(11, action(101, "a1", 5, events.OpStart)))
	v := p.Views[101]
	// The executor's read-back, on a correct clock, is 20 s "older".
	r := result(101, "a1", events.ResultSucceeded, "", at(12))
	r.Observed = observed(101, at(12), "running")
	r.Observed.Source = events.SourceExecutor
	applyAll(t, p, resultEv(12, r))
	if v.Observed.Status != "running" || v.ObservedSeq != 12 {
		t.Fatalf("read-back not adopted over a skewed observation: %s seq %d", v.Observed.Status, v.ObservedSeq)
	}
	// An observer read that started before the result was journalled may
	// predate the action: it does not roll the view back, whatever its clock.
	stale := observed(101, at(13).Add(skew), "stopped")
	stale.AfterSeq = 11
	applyAll(t, p, observedEv(13, stale))
	if v.Observed.Status != "running" || v.ObservedSeq != 12 || v.BasisSeq() != 13 {
		t.Errorf("a read started before the read-back replaced it: %s seq %d basis %d", v.Observed.Status, v.ObservedSeq, v.BasisSeq())
	}
	// One that started after it is a later read, even with a clock behind.
	fresh := observed(101, at(1), "paused")
	fresh.AfterSeq = 13
	applyAll(t, p, observedEv(14, fresh))
	if v.Observed.Status != "paused" || v.ObservedSeq != 14 {
		t.Errorf("a later read was not adopted: %s seq %d", v.Observed.Status, v.ObservedSeq)
	}
	if !projector.Supersedes(fresh, stale, 13) || projector.Supersedes(stale, fresh, 14) {
		t.Error("Supersedes disagrees with the fold")
	}
}

// An observation stamped far ahead of the journal's time (a clock in 2099,
// a forged event) is refused with a reason, and changes nothing else.
func TestFutureObservationRefused(t *testing.T) {
	p := projector.New("pve")
	ok := observed(101, at(10), "stopped")
	applyAll(t, p, observedEv(10, ok))
	v := p.Views[101]
	forged := observed(101, time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC), "running")
	applyAll(t, p, observedEv(11, forged))
	if v.Observed.Status != "stopped" || v.ObservedSeq != 10 {
		t.Fatalf("future observation adopted: %+v", v.Observed)
	}
	if v.RefusedObservation == nil || v.RefusedObservation.Seq != 11 || !strings.Contains(v.RefusedObservation.Reason, "ahead of the journal") {
		t.Fatalf("refusal not recorded: %+v", v.RefusedObservation)
	}
	// A later ordinary read is adopted (a 2099 read_at does not block it).
	next := observed(101, at(12), "running")
	applyAll(t, p, observedEv(12, next))
	if v.Observed.Status != "running" {
		t.Errorf("a correct read after a refused one: %+v", v.Observed)
	}
	// A heartbeat from 2099 counts at the journal's time.
	hb := heartbeatEv(13, "pve", true, "")
	hb.Data = body(events.Heartbeat{Meta: events.NewMeta("observer", "", forged.ReadAt), Cluster: "pve", Reachable: true})
	applyAll(t, p, hb)
	if !p.State.HeartbeatAt.Equal(at(13)) {
		t.Errorf("heartbeat at %s, want the journal's time %s", p.State.HeartbeatAt, at(13))
	}
	if p.State.VerifyPeriod != 0 {
		t.Errorf("verify period %s from a heartbeat without one", p.State.VerifyPeriod)
	}
	hb2 := heartbeatEv(14, "pve", true, "")
	hb2.Data = body(events.Heartbeat{Meta: events.NewMeta("observer", "", at(14)), Cluster: "pve", Reachable: true, VerifyPeriod: 8 * time.Minute})
	applyAll(t, p, hb2)
	if p.State.VerifyPeriod != 8*time.Minute {
		t.Errorf("verify period %s, want 8m", p.State.VerifyPeriod)
	}
	if !p.State.HeartbeatAt.Equal(at(14)) {
		t.Errorf("heartbeat at %s, want the journal's time %s", p.State.HeartbeatAt, at(14))
	}
}

func TestBasisSeqIsMax(t *testing.T) {
	cases := []struct {
		obs, evt, want uint64
	}{{0, 0, 0}, {5, 0, 5}, {0, 7, 7}, {9, 4, 9}, {4, 9, 9}}
	for _, c := range cases {
		v := projector.View{ObservedSeq: c.obs, ObservedEventSeq: c.evt}
		if got := v.BasisSeq(); got != c.want {
			t.Errorf("BasisSeq(%d,%d) = %d, want %d", c.obs, c.evt, got, c.want)
		}
	}
}

func TestActionAndResultLifecycle(t *testing.T) {
	p := projector.New("pve")
	applyAll(t, p, desiredEv(1, 101, `{"vmid":101,"power":"running"}`, nil), observedEv(2, observed(101, at(2), "stopped")))
	v := p.Views[101]

	a1 := action(101, "pve-101-1-1", 1, events.OpStart)
	applyAll(t, p, actionEv(3, a1))
	if v.InFlight == nil || v.InFlight.ID != a1.ID || v.InFlightSeq != 3 || v.Started != nil {
		t.Fatalf("in flight %+v seq %d started %+v", v.InFlight, v.InFlightSeq, v.Started)
	}
	if v.LastAction == nil || v.LastAction.ID != a1.ID || v.LastActionSeq != 3 || v.RevisionActions != 1 {
		t.Fatalf("last action %+v seq %d revision actions %d", v.LastAction, v.LastActionSeq, v.RevisionActions)
	}

	// A started result for another action is ignored.
	applyAll(t, p, resultEv(4, result(101, "pve-101-0-9", events.ResultStarted, "", at(4))))
	if v.Started != nil {
		t.Fatalf("started for another action adopted: %+v", v.Started)
	}
	// A started result for the in-flight action journals its task.
	started := result(101, a1.ID, events.ResultStarted, "", at(5))
	applyAll(t, p, resultEv(5, started))
	if v.Started == nil || v.Started.UPID != started.UPID || v.InFlight == nil || v.LastResult != nil {
		t.Fatalf("started %+v in flight %+v last result %+v", v.Started, v.InFlight, v.LastResult)
	}

	// A final result for another action does not end this one.
	applyAll(t, p, resultEv(6, result(101, "pve-101-0-9", events.ResultSucceeded, "", at(6))))
	if v.InFlight == nil || v.Started == nil {
		t.Fatalf("a stranger's result ended the in-flight action")
	}

	// The final result clears the in-flight action and is recorded.
	done := result(101, a1.ID, events.ResultSucceeded, "", at(7))
	done.Observed = observed(101, at(7), "running")
	done.Observed.Source = events.SourceExecutor
	applyAll(t, p, resultEv(7, done))
	if v.InFlight != nil || v.InFlightSeq != 0 || v.Started != nil {
		t.Fatalf("final result left in flight %+v seq %d started %+v", v.InFlight, v.InFlightSeq, v.Started)
	}
	if v.LastResult == nil || v.LastResult.ActionID != a1.ID || v.LastResult.Status != events.ResultSucceeded || v.LastResultSeq != 7 {
		t.Fatalf("last result %+v seq %d", v.LastResult, v.LastResultSeq)
	}
	// Its embedded observation is newer, so it is adopted.
	if v.Observed.Status != "running" || v.ObservedSeq != 7 || v.ObservedEventSeq != 2 || v.BasisSeq() != 7 {
		t.Fatalf("embedded observation: %+v seq %d event seq %d", v.Observed, v.ObservedSeq, v.ObservedEventSeq)
	}
	if v.LastAction.ID != a1.ID {
		t.Errorf("last action changed by a result")
	}

	// An executor's read-back is adopted even when an observer's clock
	// says it is older: it follows the guest's newest action.
	ahead := observed(101, at(50), "running")
	applyAll(t, p, observedEv(8, ahead))
	a2 := action(101, "pve-101-1-2", 1, events.OpStop)
	later := result(101, a2.ID, events.ResultSkipped, "", at(9))
	later.Observed = observed(101, at(9), "stopped")
	applyAll(t, p, actionEv(9, a2), resultEv(10, later))
	if v.Observed.Status != "stopped" || v.ObservedSeq != 10 {
		t.Errorf("read-back not adopted: %+v seq %d", v.Observed, v.ObservedSeq)
	}
	if v.RevisionActions != 2 || v.InFlight != nil || v.LastResult.Status != events.ResultSkipped {
		t.Errorf("revision actions %d in flight %+v last result %+v", v.RevisionActions, v.InFlight, v.LastResult)
	}
}

func TestRevisionActionsCountsCurrentRevisionOnly(t *testing.T) {
	p := projector.New("pve")
	applyAll(t, p, desiredEv(1, 101, `{"vmid":101,"power":"running"}`, nil))
	v := p.Views[101]
	applyAll(t, p, actionEv(2, action(101, "a-1", 1, events.OpStart)))
	// An action planned from an older revision (published after a newer
	// desired event) is in flight but does not count for the new revision.
	applyAll(t, p, desiredEv(3, 101, `{"vmid":101,"power":"stopped"}`, nil))
	if v.RevisionActions != 0 {
		t.Fatalf("new revision kept RevisionActions %d", v.RevisionActions)
	}
	applyAll(t, p, actionEv(4, action(101, "a-old", 1, events.OpStart)))
	if v.RevisionActions != 0 || v.InFlight.ID != "a-old" || v.LastAction.ID != "a-old" {
		t.Fatalf("old-revision action: revision actions %d in flight %+v", v.RevisionActions, v.InFlight)
	}
	applyAll(t, p, actionEv(5, action(101, "a-new", 3, events.OpStop)))
	if v.RevisionActions != 1 {
		t.Fatalf("current-revision action not counted: %d", v.RevisionActions)
	}
}

func TestFailuresAndTerminal(t *testing.T) {
	cases := []struct {
		class    string
		terminal bool
	}{
		{"transient", false},
		{"locked", false},
		{"unknown", false},
		{"conflict", false},
		{"gone", false},
		{"terminal", true},
		{"unauthorized", true},
	}
	for _, c := range cases {
		t.Run(c.class, func(t *testing.T) {
			p := projector.New("pve")
			applyAll(t, p, desiredEv(1, 101, `{"vmid":101,"cores":4}`, nil))
			v := p.Views[101]
			seq := uint64(2)
			fail := func(id string) {
				t.Helper()
				applyAll(t, p, actionEv(seq, action(101, id, v.DesiredSeq, events.OpSetConfig)),
					resultEv(seq+1, result(101, id, events.ResultFailed, c.class, at(int(seq+1)))))
				seq += 2
			}
			fail("f-1")
			fail("f-2")
			if v.Failures != 2 || v.LastError != c.class+" failure" || string(v.LastErrorKind) != c.class || !v.LastFailureAt.Equal(at(5)) {
				t.Fatalf("failures %d error %q class %q at %s", v.Failures, v.LastError, v.LastErrorKind, v.LastFailureAt)
			}
			if v.Terminal != c.terminal {
				t.Fatalf("Terminal = %v for class %s", v.Terminal, c.class)
			}
			if v.InFlight != nil || v.LastResult.Status != events.ResultFailed {
				t.Fatalf("in flight %+v last result %+v", v.InFlight, v.LastResult)
			}
			// Success resets the count for this revision.
			applyAll(t, p, actionEv(seq, action(101, "ok", v.DesiredSeq, events.OpSetConfig)),
				resultEv(seq+1, result(101, "ok", events.ResultSucceeded, "", at(int(seq+1)))))
			seq += 2
			if v.Failures != 0 || v.Terminal || v.LastError != "" || v.LastErrorKind != "" {
				t.Fatalf("after success: failures %d terminal %v error %q", v.Failures, v.Terminal, v.LastError)
			}
			// Fail again, then a new desired revision resets everything.
			fail("f-3")
			applyAll(t, p, desiredEv(seq, 101, `{"vmid":101,"cores":8}`, nil))
			if v.Failures != 0 || v.Terminal || v.LastError != "" || v.LastErrorKind != "" || !v.LastFailureAt.IsZero() || v.RevisionActions != 0 {
				t.Fatalf("new revision kept retry state: %+v", v)
			}
		})
	}
}

// TestFailureOfOlderRevisionDoesNotCount: the result of an action planned
// from a superseded revision is recorded but counts nothing against the
// current one.
func TestFailureOfOlderRevisionDoesNotCount(t *testing.T) {
	p := projector.New("pve")
	applyAll(t, p,
		desiredEv(1, 101, `{"vmid":101,"cores":4}`, nil),
		actionEv(2, action(101, "old", 1, events.OpSetConfig)),
		desiredEv(3, 101, `{"vmid":101,"cores":8}`, nil),
		resultEv(4, result(101, "old", events.ResultFailed, "terminal", at(4))))
	v := p.Views[101]
	if v.InFlight != nil {
		t.Fatal("final result did not clear the in-flight action")
	}
	if v.LastResult == nil || v.LastResult.ActionID != "old" {
		t.Fatalf("last result %+v", v.LastResult)
	}
	if v.Failures != 0 || v.Terminal || v.LastError != "" {
		t.Fatalf("old revision's failure counted: failures %d terminal %v error %q", v.Failures, v.Terminal, v.LastError)
	}
	// A failed result with no matching in-flight action counts nothing.
	applyAll(t, p, resultEv(5, result(101, "nobody", events.ResultFailed, "transient", at(5))))
	if v.Failures != 0 {
		t.Fatalf("unmatched failure counted: %d", v.Failures)
	}
}

func TestClusterEvents(t *testing.T) {
	p := projector.New("pve")
	ch := p.Apply(heartbeatEv(1, "pve", false, "connection refused"))
	if !ch.Cluster || ch.Resync || ch.View != nil || ch.Err != nil {
		t.Fatalf("heartbeat change %+v", ch)
	}
	want := projector.ClusterState{Cluster: "pve", HeartbeatAt: at(1), HeartbeatSeq: 1, Reachable: false, Error: "connection refused", Interval: 10 * time.Second}
	if !reflect.DeepEqual(p.State, want) {
		t.Fatalf("state %+v, want %+v", p.State, want)
	}
	p.Apply(heartbeatEv(2, "pve", true, ""))
	if !p.State.Reachable || p.State.Error != "" || p.State.HeartbeatSeq != 2 || !p.State.HeartbeatAt.Equal(at(2)) {
		t.Fatalf("second heartbeat: %+v", p.State)
	}

	ch = p.Apply(controlEv(3, "pve", events.CommandResync))
	if !ch.Cluster || !ch.Resync || ch.Err != nil {
		t.Fatalf("resync change %+v", ch)
	}
	if p.State.ResyncSeq != 3 || !p.State.ResyncAt.Equal(at(3)) || p.State.HeartbeatSeq != 2 {
		t.Fatalf("after resync: %+v", p.State)
	}
	before := p.State
	if ch := p.Apply(controlEv(4, "pve", "reboot-everything")); ch.Err == nil || ch.View != nil || ch.Cluster || !reflect.DeepEqual(p.State, before) {
		t.Fatalf("unknown command: change %+v state %+v", ch, p.State)
	}
	if len(p.Views) != 0 {
		t.Fatalf("cluster events created views: %v", p.Views)
	}
}

func TestOtherClusterIgnored(t *testing.T) {
	p := projector.New("pve")
	other := []projector.Event{
		{Seq: 1, Subject: "pve.desired.lab.101", Data: []byte(`{"vmid":101,"power":"running"}`)},
		{Seq: 2, Subject: "pve.observed.lab.101.4", Data: body(observed(101, at(2), "running"))},
		heartbeatEv(3, "lab", true, ""),
		controlEv(4, "lab", events.CommandResync),
		{Seq: 5, Subject: "pve.observed.lab.101", Data: []byte(`not json`)},
	}
	for _, ev := range other {
		if ch := p.Apply(ev); !reflect.DeepEqual(ch, projector.Change{}) {
			t.Errorf("event of another cluster %s changed something: %+v", ev.Subject, ch)
		}
	}
	if len(p.Views) != 0 || !reflect.DeepEqual(p.State, projector.ClusterState{Cluster: "pve"}) {
		t.Fatalf("views %v state %+v", p.Views, p.State)
	}
	if p.LastSeq != 5 {
		t.Fatalf("LastSeq %d: skipped events still advance the position", p.LastSeq)
	}
}

func TestReapplyIsNoOp(t *testing.T) {
	p := projector.New("pve")
	evs := []projector.Event{
		desiredEv(1, 101, `{"vmid":101,"power":"running"}`, nil),
		observedEv(2, observed(101, at(2), "stopped")),
		actionEv(3, action(101, "a-1", 1, events.OpStart)),
		resultEv(4, result(101, "a-1", events.ResultFailed, "transient", at(4))),
		heartbeatEv(5, "pve", true, ""),
	}
	applyAll(t, p, evs...)
	want := snapshot(t, p)
	// Redelivery of everything, in order and reversed, and of a newer event
	// body under an old sequence: all no-ops.
	for _, ev := range evs {
		if ch := p.Apply(ev); !reflect.DeepEqual(ch, projector.Change{}) {
			t.Errorf("re-applying seq %d: %+v", ev.Seq, ch)
		}
	}
	for i := len(evs) - 1; i >= 0; i-- {
		p.Apply(evs[i])
	}
	p.Apply(desiredEv(3, 101, `{"vmid":101,"power":"stopped"}`, nil))
	p.Apply(desiredEv(5, 101, `{"vmid":101,"power":"stopped"}`, nil))
	if got := snapshot(t, p); got != want {
		t.Fatalf("re-applying changed the projector:\n got %s\nwant %s", got, want)
	}
	if p.LastSeq != 5 {
		t.Fatalf("LastSeq %d", p.LastSeq)
	}
}

func TestUndecodableEvents(t *testing.T) {
	cases := []struct {
		name string
		ev   projector.Event
	}{
		{"observed not JSON", projector.Event{Seq: 10, Subject: "pve.observed.pve.101", Data: []byte(`{"vmid":`)}},
		{"observed wrong type", projector.Event{Seq: 10, Subject: "pve.observed.pve.101.2", Data: []byte(`{"read_at":17}`)}},
		{"action not JSON", projector.Event{Seq: 10, Subject: "pve.action.pve.101", Data: []byte(`<xml/>`)}},
		{"action empty body", projector.Event{Seq: 10, Subject: "pve.action.pve.101", Data: nil}},
		{"result wrong type", projector.Event{Seq: 10, Subject: "pve.result.pve.101", Data: []byte(`{"status":3}`)}},
		{"result bad embedded observation", projector.Event{Seq: 10, Subject: "pve.result.pve.101", Data: []byte(`{"status":"succeeded","observed":[]}`)}},
		{"heartbeat not JSON", projector.Event{Seq: 10, Subject: "pve.heartbeat.pve", Data: []byte(`]`)}},
		{"control not JSON", projector.Event{Seq: 10, Subject: "pve.control.pve", Data: []byte(`"resync`)}},
		{"malformed subject", projector.Event{Seq: 10, Subject: "pve.desired.pve.abc", Data: []byte(`{}`)}},
		{"unknown kind", projector.Event{Seq: 10, Subject: "pve.nope.pve.101", Data: []byte(`{}`)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := projector.New("pve")
			applyAll(t, p, desiredEv(1, 101, `{"vmid":101,"power":"running"}`, nil),
				observedEv(2, observed(101, at(2), "stopped")),
				actionEv(3, action(101, "a-1", 1, events.OpStart)),
				heartbeatEv(4, "pve", true, ""))
			before := snapshot(t, p)
			var ch projector.Change
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("Apply panicked: %v", r)
					}
				}()
				ch = p.Apply(c.ev)
			}()
			if ch.Err == nil {
				t.Fatalf("no error for %s %q", c.ev.Subject, c.ev.Data)
			}
			if ch.Resync || ch.Cluster {
				t.Errorf("undecodable event reported a cluster change: %+v", ch)
			}
			if p.LastSeq != 10 {
				t.Errorf("LastSeq %d: an undecodable event is still consumed", p.LastSeq)
			}
			after := strings.Replace(snapshot(t, p), `"LastSeq":10`, `"LastSeq":4`, 1)
			if after != before {
				t.Errorf("undecodable event changed views:\n got %s\nwant %s", after, before)
			}
		})
	}
}

// TestUndecodableEventCreatesNoView: garbage on a guest's subject must not
// make a phantom guest appear in status listings.
func TestUndecodableEventCreatesNoView(t *testing.T) {
	for _, subject := range []string{"pve.observed.pve.555", "pve.action.pve.555.1", "pve.result.pve.555"} {
		p := projector.New("pve")
		ch := p.Apply(projector.Event{Seq: 1, Subject: subject, Data: []byte(`{`)})
		if ch.Err == nil {
			t.Fatalf("%s: no error", subject)
		}
		if ch.View != nil || len(p.Views) != 0 {
			t.Errorf("%s: undecodable event created a view: change %+v views %v", subject, ch, p.Views)
		}
	}
}

// A read-back the executor derived from the action's basis (AfterSeq: the
// journal it had read before acting) is the result of the guest's own
// action, adopted as a read one is: an observation journalled while the
// action ran (after the executor's check that none was, before its
// result) may have been read before the outcome, whatever it knew of the
// journal, and must not stand against it. converge bench --profile
// estate: a pass that began before the start was journalled read the
// guest stopped, was journalled while the start ran, and the planner
// started the guest again from it (24 of 10,000 guests). Observations
// journalled after the result supersede it by the usual rule.
func TestDerivedReadBackAdoptedOverObservationDuringAction(t *testing.T) {
	p := projector.New("pve")
	basis := observed(101, at(10), "stopped")
	basis.AfterSeq = 9
	applyAll(t, p, desiredEv(5, 101, `{"vmid":101,"power":"running","description":"x"}`, nil), observedEv(10, basis),
		actionEv(11, action(101, "a1", 5, events.OpSetConfig)))
	v := p.Views[101]
	derived := func(status string, afterSeq uint64) *events.Observed {
		o := observed(101, at(20), status)
		o.Source, o.Digest, o.AfterSeq, o.Config.Description = events.SourceExecutor, "", afterSeq, "x"
		return o
	}
	// Nothing journalled since: adopted.
	r := result(101, "a1", events.ResultSucceeded, "", at(12))
	r.Observed = derived("stopped", 11)
	applyAll(t, p, resultEv(12, r))
	if v.Observed.Config.Description != "x" || v.ObservedSeq != 12 {
		t.Fatalf("derived read-back not adopted: %+v seq %d", v.Observed.Config, v.ObservedSeq)
	}
	// A start, and an observer's pass that read the guest stopped while it
	// ran, journalled before its result. The pass's observation is adopted
	// over the config write's read-back; the start's read-back over it.
	start := func(id string, seq, passAfter uint64) {
		t.Helper()
		applyAll(t, p, actionEv(seq, action(101, id, 5, events.OpStart)))
		stale := observed(101, at(21), "stopped")
		stale.AfterSeq = passAfter
		applyAll(t, p, observedEv(seq+2, stale))
		if v.ObservedSeq != seq+2 {
			t.Fatalf("%s: the pass's observation was not adopted: seq %d", id, v.ObservedSeq)
		}
		rs := result(101, id, events.ResultSucceeded, "", at(22))
		rs.Observed = derived("running", seq)
		applyAll(t, p, resultEv(seq+3, rs))
		if v.Observed.Status != "running" || v.ObservedSeq != seq+3 {
			t.Errorf("%s: a read made while the start ran stands against its read-back: %s seq %d (the planner starts it again)",
				id, v.Observed.Status, v.ObservedSeq)
		}
		if v.InFlight != nil || v.LastResultSeq != seq+3 {
			t.Errorf("%s: the result itself must count: in flight %v, last result %d", id, v.InFlight, v.LastResultSeq)
		}
	}
	// The pass began before the start was journalled (the bench's case).
	start("s1", 13, 12)
	// Stopped again, read after that.
	again := observed(101, at(23), "stopped")
	again.AfterSeq = 16
	applyAll(t, p, observedEv(17, again))
	// The pass began after the start was journalled, before the executor
	// got to it (its deliveries queued).
	start("s2", 23, 23)

	// After the result (26): a read begun before it is not adopted; one
	// begun after it is (a guest stopped by hand since).
	early := observed(101, at(24), "stopped")
	early.AfterSeq = 25
	applyAll(t, p, observedEv(27, early))
	if v.ObservedSeq != 26 {
		t.Errorf("a read begun before the read-back superseded it: seq %d", v.ObservedSeq)
	}
	late := observed(101, at(25), "stopped")
	late.AfterSeq = 26
	applyAll(t, p, observedEv(28, late))
	if v.Observed.Status != "stopped" || v.ObservedSeq != 28 {
		t.Errorf("a read begun after the read-back did not supersede it: %s seq %d", v.Observed.Status, v.ObservedSeq)
	}
	// A read-back actually read (no AfterSeq) is the newest read, as before.
	applyAll(t, p, actionEv(29, action(101, "a3", 5, events.OpStart)))
	r3 := result(101, "a3", events.ResultSucceeded, "", at(30))
	r3.Observed = observed(101, at(30), "running")
	r3.Observed.Source = events.SourceExecutor
	applyAll(t, p, resultEv(30, r3))
	if v.ObservedSeq != 30 {
		t.Errorf("a read read-back was not adopted: seq %d", v.ObservedSeq)
	}
}

// TestSnapshotUnchangedByLaterFolds: a snapshot shares the fold's views
// copy on write: whatever is folded after it, desired, results,
// observations and operators' requests alike, leaves it as it was.
func TestSnapshotUnchangedByLaterFolds(t *testing.T) {
	evs := benchEvents(40)
	p := projector.New("pve")
	for _, ev := range evs[:len(evs)/2] {
		p.Apply(ev)
	}
	s := p.Snapshot()
	before, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	seq := uint64(0)
	for _, ev := range evs[len(evs)/2:] {
		p.Apply(ev)
		seq = ev.Seq
	}
	for _, c := range []events.Control{{Command: events.CommandPause, VMIDs: []int{100, 101}},
		{Command: events.CommandResume, All: true}, {Command: events.CommandRelease, VMIDs: []int{102}}} {
		seq++
		body, _ := json.Marshal(c)
		p.Apply(projector.Event{Seq: seq, Subject: events.ClusterSubject(events.KindControl, "pve"), Data: body})
	}
	after, _ := json.Marshal(s)
	if string(before) != string(after) {
		t.Fatalf("the snapshot changed with later folds:\nbefore %s\nafter  %s", before, after)
	}
	if again, _ := json.Marshal(p.Snapshot()); string(again) == string(before) {
		t.Fatal("the fold did not move on")
	}
}

// TestRecurringDesiredValuesShared: guests asking for the same sizes,
// description and tag set point at one copy, and each still reads the
// values it asked for (tags in its own order, an empty set kept empty).
func TestRecurringDesiredValuesShared(t *testing.T) {
	p := projector.New("pve")
	body := func(vmid int, rest string) string { return `{"vmid":` + strconv.Itoa(vmid) + `,` + rest + `}` }
	same := `"power":"running","cores":4,"memory_mib":4096,"description":"web","pool":"web","tags":["prod","web"]`
	for i, b := range []string{
		body(101, same),
		body(102, same),
		body(103, `"cores":16,"memory_mib":16,"description":"prod","pool":"db","tags":["web","prod"]`),
		body(104, `"cores":2,"tags":[]`),
	} {
		if ch := p.Apply(desiredEv(uint64(i+1), 101+i, b, nil)); ch.Err != nil {
			t.Fatal(ch.Err)
		}
	}
	for id := 101; id <= 104; id++ {
		if r := p.Views[id].Rejected; r != nil {
			t.Fatalf("vmid %d rejected: %s", id, r.Reason)
		}
	}
	a, b, c, e := p.Views[101].Desired, p.Views[102].Desired, p.Views[103].Desired, p.Views[104].Desired
	if a.Cores != b.Cores || a.MemoryMiB != b.MemoryMiB || a.Description != b.Description || a.Pool != b.Pool || a.Tags != b.Tags {
		t.Errorf("equal values not shared: %p/%p %p/%p %p/%p %p/%p %p/%p",
			a.Cores, b.Cores, a.MemoryMiB, b.MemoryMiB, a.Description, b.Description, a.Pool, b.Pool, a.Tags, b.Tags)
	}
	if a.Cores == a.MemoryMiB {
		t.Error("4 cores and 4096 MiB share a pointer")
	}
	for _, d := range []*events.Desired{a, b} {
		if *d.Cores != 4 || *d.MemoryMiB != 4096 || *d.Description != "web" || *d.Pool != "web" || !reflect.DeepEqual(*d.Tags, []string{"prod", "web"}) {
			t.Errorf("vmid %d reads %d %d %q %q %v", d.VMID, *d.Cores, *d.MemoryMiB, *d.Description, *d.Pool, *d.Tags)
		}
	}
	if *c.Cores != 16 || *c.MemoryMiB != 16 || c.Cores != c.MemoryMiB || *c.Description != "prod" || *c.Pool != "db" || !reflect.DeepEqual(*c.Tags, []string{"web", "prod"}) {
		t.Errorf("vmid 103 reads %d %d %q %q %v", *c.Cores, *c.MemoryMiB, *c.Description, *c.Pool, *c.Tags)
	}
	if e.Tags == nil || len(*e.Tags) != 0 || *e.Cores != 2 {
		t.Errorf("vmid 104 reads %v %v", e.Tags, *e.Cores)
	}

	// A planner restarted from its checkpoint (decoded apart, guest by
	// guest) shares them again.
	raw, err := json.Marshal(p.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	var snap projector.Snapshot
	if err := json.Unmarshal(raw, &snap); err != nil {
		t.Fatal(err)
	}
	r, err := projector.Restore(&snap, "pve", nil)
	if err != nil {
		t.Fatal(err)
	}
	a, b = r.Views[101].Desired, r.Views[102].Desired
	if a.Cores != b.Cores || a.MemoryMiB != b.MemoryMiB || a.Description != b.Description || a.Pool != b.Pool || a.Tags != b.Tags || a.Power != b.Power {
		t.Error("equal values not shared after a restore")
	}
	if *a.Cores != 4 || *a.Description != "web" || !reflect.DeepEqual(*b.Tags, []string{"prod", "web"}) {
		t.Errorf("restored vmid 101 reads %d %q %v", *a.Cores, *a.Description, *b.Tags)
	}
}
