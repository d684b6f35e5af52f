package notify

import (
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
)

// Notice is what a receiver is sent (the generic JSON body), and what the
// poller records in the notifier's bucket for the routes to deliver.
type Notice struct {
	// Key is derived from the cause alone (never from when or how often it
	// was sent): every copy of one notification carries the same key, in
	// the body and as the Idempotency-Key and X-Converge-Key headers.
	Key     string  `json:"key"`
	Trigger Trigger `json:"trigger"`
	Cluster string  `json:"cluster"`
	VMID    int     `json:"vmid,omitempty"`
	State   string  `json:"state,omitempty"`
	Reason  string  `json:"reason,omitempty"`
	// Revision is the guest's desired revision (its journal sequence).
	Revision       uint64 `json:"desired_revision,omitempty"`
	AwaitsApproval string `json:"awaits_approval,omitempty"`
	ActionID       string `json:"action_id,omitempty"`
	// Member is the lost executor's lease member id; Partition the
	// partition it held (partition-lost).
	Member    string `json:"member,omitempty"`
	Partition *int   `json:"partition,omitempty"`
	// Condition is the readiness condition (role-not-ready): no-planner,
	// no-executor, proxmox-unreachable, observer-silent.
	Condition string `json:"condition,omitempty"`
	// At is when the cause was recorded (the guest document's time, the
	// poll that found it): the same in every copy.
	At   time.Time `json:"at"`
	Text string    `json:"text"`
}

// guestRecord is what a route remembers of a guest (in the notifier's
// bucket, written once the notification it caused, if any, was delivered
// or parked): enough to tell a transition.
type guestRecord struct {
	// Trigger is the state trigger the guest was in ("" for none).
	Trigger Trigger `json:"trigger,omitempty"`
	// Converged is the newest desired revision reached.
	Converged uint64 `json:"converged,omitempty"`
	// Rejected is the journal sequence of the rejected desired event last
	// told: each rejected event is told once.
	Rejected uint64 `json:"rejected,omitempty"`
	// Entered counts the guest's episodes in each state trigger (error,
	// held, destroy-gated): the second and later episodes' keys end in
	// /e<n>, so that a guest back in a state it genuinely left is told
	// again under a new key.
	Entered map[Trigger]int `json:"entered,omitempty"`
	// Sent is the key of the state notice last decided (delivered or
	// parked): a key is never sent twice in a row.
	Sent string `json:"sent,omitempty"`
}

// equal reports whether two records are the same.
func (g guestRecord) equal(o guestRecord) bool {
	return g.Trigger == o.Trigger && g.Converged == o.Converged && g.Rejected == o.Rejected && g.Sent == o.Sent &&
		maps.Equal(g.Entered, o.Entered)
}

// transient reports a state a guest passes through without leaving the
// state trigger it was in: blocked (Proxmox unreachable, the observer
// silent: the planner derives it before anything else) and paused.
func transient(s views.Summary, t Trigger) bool {
	return t == "" && (s.State == planner.Blocked || s.State == planner.Paused)
}

// stateTrigger is the state trigger a guest's summary is in, and the
// cause its key names beyond the revision (rejected: the rejected event's
// sequence, given as rejected).
func stateTrigger(s views.Summary, rejected uint64) (Trigger, string) {
	action := ""
	if s.Last != nil {
		action = s.Last.ID
	}
	switch {
	case s.State == planner.Error:
		return TriggerError, action
	case s.State == planner.Rejected:
		return TriggerRejected, strconv.FormatUint(rejected, 10)
	case s.AwaitsApproval == planner.AwaitsGuard:
		return TriggerHeld, action
	case s.AwaitsApproval == planner.AwaitsDestroy:
		return TriggerDestroyGated, ""
	}
	return "", ""
}

// guestNotice decides what a guest's new document means to a route, given
// what the route recorded of it before (nil: never seen) and since when
// the route exists: the notice (nil for none) and the record to keep.
//
//   - error, held, destroy-gated: on entering the state (the previous
//     document was in another); rejected: each rejected desired event
//     (rejected is its journal sequence); a guest first seen in one is
//     notified too (it is a standing problem);
//   - converged: when a desired revision other than the one last reached
//     is reached; a guest first seen converged only if its desired state
//     was published after the route was created (else it is the baseline,
//     not a change).
func guestNotice(prev *guestRecord, s views.Summary, rejected uint64, since time.Time) (*Notice, guestRecord) {
	var next guestRecord
	if prev != nil {
		next = *prev
		next.Entered = maps.Clone(prev.Entered)
	}
	t, cause := stateTrigger(s, rejected)
	if transient(s, t) {
		// Blocked or paused for a moment: still in the state it was in
		// (an error blocked during a Proxmox blip and in error again is
		// one episode, told once).
		return nil, next
	}
	next.Trigger = t
	newRejection := t == TriggerRejected && (prev == nil || prev.Rejected != rejected)
	if t == TriggerRejected {
		next.Rejected = rejected
	}
	base := Notice{Cluster: s.Cluster, VMID: s.VMID, State: string(s.State), Reason: s.Reason, Revision: s.Revision,
		AwaitsApproval: string(s.AwaitsApproval), At: s.UpdatedAt.UTC()}
	if s.Last != nil {
		base.ActionID = s.Last.ID
	}
	prefix := s.Cluster + "/" + strconv.Itoa(s.VMID) + "/"
	rev := strconv.FormatUint(s.Revision, 10)
	if s.State == planner.Converged && s.Revision > 0 {
		reached := prev != nil && prev.Converged == s.Revision
		next.Converged = s.Revision
		if reached || (prev == nil && s.DesiredAt.Before(since)) {
			return nil, next
		}
		n := base
		n.Trigger, n.Key = TriggerConverged, prefix+"converged/"+rev
		n.Text = fmt.Sprintf("guest %d (%s) converged: desired revision %d reached", s.VMID, s.Cluster, s.Revision)
		return &n, next
	}
	if t == "" || (prev != nil && prev.Trigger == t && !newRejection) {
		return nil, next
	}
	n := base
	n.Trigger, n.Key = t, prefix+string(t)+"/"+rev
	if cause != "" {
		n.Key += "/" + cause
	}
	if t == TriggerRejected {
		n.Key = prefix + string(t) + "/" + cause // the rejected event, not the revision in force
	} else {
		if next.Entered == nil {
			next.Entered = map[Trigger]int{}
		}
		next.Entered[t]++
		if e := next.Entered[t]; e > 1 {
			n.Key += "/e" + strconv.Itoa(e)
		}
	}
	if prev != nil && prev.Sent == n.Key {
		return nil, next
	}
	next.Sent = n.Key
	switch t {
	case TriggerError:
		n.Text = fmt.Sprintf("guest %d (%s) entered error: %s", s.VMID, s.Cluster, s.Reason)
		if s.LastError != "" && s.LastError != s.Reason {
			n.Text += " (" + s.LastError + ")"
		}
	case TriggerRejected:
		n.Text = fmt.Sprintf("guest %d (%s): desired event %d rejected (revision %d stays in force): %s", s.VMID, s.Cluster, rejected, s.Revision, s.Reason)
	case TriggerHeld:
		n.Text = fmt.Sprintf("guest %d (%s): held by the mass-change guard, awaits `converge approve %d`: %s", s.VMID, s.Cluster, s.VMID, s.Reason)
	case TriggerDestroyGated:
		n.Text = fmt.Sprintf("guest %d (%s): destroy waits for `converge approve %d`: %s", s.VMID, s.Cluster, s.VMID, s.Reason)
	}
	return &n, next
}
