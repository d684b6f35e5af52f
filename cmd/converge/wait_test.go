package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
	"github.com/converge-pve/converge/projector"
)

func waitDoc(id int, kind planner.StatusKind, reason, lastErr string) *views.GuestDoc {
	return &views.GuestDoc{View: &projector.View{VMID: id, DesiredSeq: 5, Desired: &events.Desired{VMID: id}, LastError: lastErr},
		Status: planner.Status{Kind: kind, Reason: reason}}
}

// revs is a wait set of ids, each at desired revision 5.
func revs(ids ...int) waitSet {
	ws := waitSet{ids: ids, want: map[int]uint64{}}
	for _, id := range ids {
		ws.want[id] = 5
	}
	return ws
}

// feed is a channel holding docs, closed: a watch that ended after them.
func feed(docs ...*views.GuestDoc) <-chan *views.GuestDoc {
	ch := make(chan *views.GuestDoc, len(docs))
	for _, d := range docs {
		ch <- d
	}
	close(ch)
	return ch
}

// wait exiting 4 names every guest in error or rejected, each with its
// reason, not only the first; timing out, it gives each guest's last error.
func TestWaitNamesEveryFailure(t *testing.T) {
	ch := make(chan *views.GuestDoc, 4)
	ch <- waitDoc(108, planner.Error, "clone failed: storage full (not retried until the desired state changes)", "storage full")
	ch <- waitDoc(109, planner.Converged, "", "")
	ch <- waitDoc(110, planner.Rejected, "cores: must be >= 1", "")
	ch <- waitDoc(111, planner.Error, "start failed: no quorum", "no quorum")
	_, err := awaitConverged(context.Background(), revs(108, 109, 110, 111), ch, time.Minute)
	if codeOf(err) != exitGuestFailed {
		t.Fatalf("exit %d: %v", codeOf(err), err)
	}
	for _, w := range []string{"guest 108 is error: clone failed: storage full", "guest 110 is rejected: cores", "guest 111 is error: start failed: no quorum"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q does not say %q", err, w)
		}
	}
	if strings.Contains(err.Error(), "109") {
		t.Errorf("names the converged guest: %v", err)
	}

	// Timing out: what is left, with the last error status shows.
	ctx, cancel := context.WithCancel(context.Background())
	ch = make(chan *views.GuestDoc, 1)
	ch <- waitDoc(108, planner.Pending, "retry 2 after clone failed", "storage full")
	go func() {
		for len(ch) > 0 {
			time.Sleep(time.Millisecond) // until the doc is read
		}
		cancel()
	}()
	_, err = awaitConverged(ctx, revs(108), ch, time.Minute)
	if codeOf(err) != exitNotDone || !strings.Contains(err.Error(), "[last error: storage full]") {
		t.Fatalf("exit %d: %v", codeOf(err), err)
	}
}

// released is a guest's document after a release journalled at seq 9,
// after its desired revision 5.
func released(id int) *views.GuestDoc {
	d := waitDoc(id, planner.Unmanaged, "no desired state: converge leaves this guest alone", "")
	d.View.Desired = nil
	d.View.Released = &projector.Mark{Seq: 9, By: "converge-cli:ops", At: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)}
	return d
}

// Issue 35, point 10: wait on a released guest fails at once (exit 2),
// naming the release, instead of waiting out its timeout (exit 3); wait
// --all leaves it out.
func TestWaitReleasedGuest(t *testing.T) {
	// A context that never ends: a wait that does not decide from the
	// documents alone would hang here, not time out.
	_, err := awaitConverged(context.Background(), revs(101, 105), feed(waitDoc(101, planner.Converged, "", ""), released(105)), time.Minute)
	if codeOf(err) != exitUsage || !strings.Contains(err.Error(), "guest 105 was released (#9 by converge-cli:ops") {
		t.Fatalf("exit %d: %v", codeOf(err), err)
	}
	// A document that shows a release before the newest desired revision
	// (released, then desired again, not folded yet) is not the guest's
	// state: it is waited for (here, the watch ends first).
	old := released(105)
	old.View.DesiredSeq, old.View.Released.Seq = 3, 4
	_, err = awaitConverged(context.Background(), revs(105), feed(old), time.Minute)
	if codeOf(err) != exitNotDone {
		t.Fatalf("a release before the revision: exit %d: %v", codeOf(err), err)
	}

	all := revs(101, 105, 106)
	all.all = true
	res, err := awaitConverged(context.Background(), all, feed(waitDoc(101, planner.Converged, "", ""), released(105), waitDoc(106, planner.Absent, "", "")), time.Minute)
	if err != nil || fmt.Sprint(res.converged) != "[101 106]" || fmt.Sprint(res.released) != "[105]" {
		t.Fatalf("--all: %+v %v", res, err)
	}
}

// Issue 35, point 10: a guest only an operator can move on (held, paused,
// a gated destroy, a change waiting for a restart under restart: never)
// ends the wait at once with exit 5, and the message is a short summary
// by condition, not every guest's whole reason on one line.
func TestWaitStopsAtOperatorStates(t *testing.T) {
	guard := "mass-change guard: 9 guests already shut down, stopped, rebooted, migrated or destroyed within 10m0s (limit 8: the larger of 10%% of 80 managed guests and 8); shutdown waits for approval (converge approve %d, or --all); next: " + strings.Repeat("desired power stopped, guest is running ", 10)
	var docs []*views.GuestDoc
	var ids []int
	for id := 200; id < 240; id++ {
		ids = append(ids, id)
		docs = append(docs, waitDoc(id, planner.Held, fmt.Sprintf(guard, id), ""))
	}
	gate := waitDoc(300, planner.Blocked, "desired absent: the destroy gate is closed (run the planner and executors with --allow-destroy, or `converge approve 300` for this guest)", "")
	gate.View.Desired.Absent = true
	restart := waitDoc(301, planner.Pending, "cores waits for a restart (restart: never; desired restart \"allowed\" or --restart allowed lets converge reboot the guest)", "")
	paused := waitDoc(302, planner.Paused, "paused by converge-cli:ops; would: start", "")
	ids = append(ids, 300, 301, 302, 303)
	docs = append(docs, gate, restart, paused, waitDoc(303, planner.Converged, "", ""))

	_, err := awaitConverged(context.Background(), revs(ids...), feed(docs...), time.Minute)
	if codeOf(err) != exitNeedsOperator {
		t.Fatalf("exit %d: %v", codeOf(err), err)
	}
	msg := err.Error()
	t.Logf("%d bytes:\n%s", len(msg), msg)
	for _, w := range []string{"43 guest(s) wait for an operator", "held by the mass-change guard", "200 201 202", "and 20 more",
		"a destroy behind its gate", "guest 300: desired absent: the destroy gate is closed",
		"restart: never", "guest 301: cores waits for a restart", "paused (`converge resume"} {
		if !strings.Contains(msg, w) {
			t.Errorf("does not say %q", w)
		}
	}
	if len(msg) > 1500 || strings.Contains(msg, "303") {
		t.Errorf("%d bytes, or names the converged guest", len(msg))
	}
	for _, line := range strings.Split(msg, "\n") {
		if len(line) > 400 {
			t.Errorf("a line of %d bytes: %s", len(line), line)
		}
	}

	// Gated or not, other blocked and pending guests are waited for: the
	// observer comes back, a task slot frees up.
	for _, d := range []*views.GuestDoc{
		waitDoc(400, planner.Blocked, "observer silent for 40s (last heartbeat 2026-11-23T12:00:00Z)", ""),
		waitDoc(401, planner.Pending, "cores waits for a restart: allowed only in the restart window 02:00-04:00 (next opens 2026-11-24T02:00:00Z)", ""),
	} {
		if what := operatorOnly(d); what != "" {
			t.Errorf("%d %s (%s) taken for %q", d.View.VMID, d.Status.Kind, d.Status.Reason, what)
		}
	}

	// A failure and an operator's condition at once: exit 4, both named.
	_, err = awaitConverged(context.Background(), revs(108, 300), feed(waitDoc(108, planner.Error, "start failed: no quorum", ""), gate), time.Minute)
	if codeOf(err) != exitGuestFailed || !strings.Contains(err.Error(), "guest 108 is error") || !strings.Contains(err.Error(), "guest 300: desired absent") {
		t.Fatalf("exit %d: %v", codeOf(err), err)
	}
}

// Many guests in error: ten named, the rest counted.
func TestWaitSummarisesManyFailures(t *testing.T) {
	var docs []*views.GuestDoc
	var ids []int
	for id := 500; id < 530; id++ {
		ids = append(ids, id)
		docs = append(docs, waitDoc(id, planner.Error, "clone failed: "+strings.Repeat("storage full ", 60), ""))
	}
	_, err := awaitConverged(context.Background(), revs(ids...), feed(docs...), time.Minute)
	if codeOf(err) != exitGuestFailed || !strings.Contains(err.Error(), "guest 509 is error") || strings.Contains(err.Error(), "guest 510 ") ||
		!strings.Contains(err.Error(), "and 20 more in error or rejected") || len(err.Error()) > 4000 {
		t.Fatalf("exit %d (%d bytes): %v", codeOf(err), len(err.Error()), err)
	}
}

// A guest paused and resumed just before wait started may still be
// paused in the views it reads first: wait does not call it waiting for
// an operator (exit 5) until the planner has folded the journal as it was
// when wait started; then the resumed guest converges.
func TestWaitNotFooledByStaleViews(t *testing.T) {
	paused := waitDoc(302, planner.Paused, "paused by converge-cli:ops; would: start", "")
	paused.View.Paused = &projector.Mark{Seq: 6, By: "converge-cli:ops"}
	ch := make(chan *views.GuestDoc)
	asked := make(chan struct{})
	var once sync.Once
	var caught atomic.Bool
	ws := revs(302)
	ws.caughtUp = func(context.Context) bool {
		once.Do(func() { close(asked) })
		return caught.Load()
	}
	go func() {
		ch <- paused
		<-asked // wait asked whether the planner caught up: not yet
		ch <- waitDoc(302, planner.Converged, "", "")
		caught.Store(true)
	}()
	if _, err := awaitConverged(context.Background(), ws, ch, time.Minute); err != nil {
		t.Fatalf("exit %d: %v: want converged once the resume is folded", codeOf(err), err)
	}
}
