package projector

import (
	"slices"
	"time"

	"github.com/converge-pve/converge/events"
)

// View is everything converge knows about one guest.
type View struct {
	VMID    int    `json:"vmid"`
	Cluster string `json:"cluster"`

	// Desired is the last valid desired state; DesiredSeq its stream
	// sequence, which is the desired revision.
	Desired    *events.Desired `json:"desired,omitempty"`
	DesiredSeq uint64          `json:"desired_seq,omitempty"`
	DesiredAt  time.Time       `json:"desired_at,omitzero"`
	Publisher  string          `json:"publisher,omitempty"`
	// SignedBy is the trusted key that signed the accepted desired event
	// (Projector.Auth), "" when it was not signed.
	SignedBy      string `json:"signed_by,omitempty"`
	CorrelationID string `json:"correlation_id,omitempty"`
	// Signatures are the guest's desired events' signatures seen within
	// the signature window, by digest, with their signing time: one seen
	// again is a replay.
	Signatures map[string]time.Time `json:"signatures,omitempty"`
	// Rejected is set when the newest desired event was invalid.
	Rejected *Rejection `json:"rejected,omitempty"`

	// Observed is the newest read of the guest; ObservedSeq the sequence
	// of the event that carried it (an observed event or a result).
	Observed    *events.Observed `json:"observed,omitempty"`
	ObservedSeq uint64           `json:"observed_seq,omitempty"`
	// ObservedEventSeq is the newest observed event for the guest, even one
	// ignored as an older read: actions name max(ObservedSeq,
	// ObservedEventSeq) as their basis, so an executor's "newer
	// observation" fence never fires on an event the plan already saw.
	ObservedEventSeq uint64 `json:"observed_event_seq,omitempty"`

	// InFlight is the action awaiting its final result; Started its
	// journalled task, once the executor has one.
	InFlight      *events.Action `json:"in_flight,omitempty"`
	InFlightSeq   uint64         `json:"in_flight_seq,omitempty"`
	Started       *events.Result `json:"started,omitempty"`
	LastAction    *events.Action `json:"last_action,omitempty"`
	LastActionSeq uint64         `json:"last_action_seq,omitempty"`
	// RevisionActions counts actions planned for DesiredSeq: the next one's
	// deterministic id.
	RevisionActions int `json:"revision_actions,omitempty"`

	LastResult    *events.Result `json:"last_result,omitempty"`
	LastResultSeq uint64         `json:"last_result_seq,omitempty"`

	// Failures of actions planned for DesiredSeq, the last one's time and
	// error; Terminal when the last failure will not go away by retrying.
	Failures      int               `json:"failures,omitempty"`
	LastFailureAt time.Time         `json:"last_failure_at,omitzero"`
	LastError     string            `json:"last_error,omitempty"`
	LastErrorKind events.ErrorClass `json:"last_error_class,omitempty"`
	Terminal      bool              `json:"terminal,omitempty"`

	// Burst counts actions of DesiredSeq that finished without failing
	// since BurstStart (a window of BurstWindow, on the journal's clock):
	// the planner stops a guest whose actions keep succeeding without
	// converging it (a loop) instead of flooding Proxmox.
	Burst      int       `json:"burst,omitempty"`
	BurstStart time.Time `json:"burst_start,omitzero"`
	// Repeats counts consecutive outcomes that changed nothing or raced
	// (already done, skipped, digest conflict); the planner backs them off
	// from LastRepeatAt.
	Repeats      int       `json:"repeats,omitempty"`
	LastRepeatAt time.Time `json:"last_repeat_at,omitzero"`

	// RefusedObservation is the newest observation refused as unusable
	// (read_at far ahead of the journal's time).
	RefusedObservation *Rejection `json:"refused_observation,omitempty"`

	// Paused is the pause in force for this guest (converge pause), nil
	// when none; Released the release that forgot its desired state, until
	// a new one arrives.
	Paused   *Mark `json:"paused,omitempty"`
	Released *Mark `json:"released,omitempty"`
	// Approved is the newest approval naming this guest: it releases a
	// hold journalled before it.
	Approved *Mark `json:"approved,omitempty"`
	// GoneSeq is the newest adopted reading that found the guest gone: an
	// approval journalled before it was for a guest that no longer
	// exists, and never opens the destroy gate for a new one that takes
	// its vmid.
	GoneSeq uint64 `json:"gone_seq,omitempty"`
	// Held is the hold the planner journalled for the guest (an OpHold
	// action) until the held operation is published (approved), a new
	// desired state arrives or the guest is released.
	Held *Hold `json:"held,omitempty"`

	// Addresses is the guest agent's newest report of the guest's
	// addresses, AddressesSeq the event that carried it (addresses.go):
	// informational, never an observation of the guest.
	Addresses    *events.Addresses `json:"addresses,omitempty"`
	AddressesSeq uint64            `json:"addresses_seq,omitempty"`

	// Seq is the sequence of the last event that changed this view.
	Seq uint64 `json:"seq"`

	gen uint64 // the projector's snapshot generation it belongs to
}

// Hold is a step the planner held back, as journalled.
type Hold struct {
	Seq        uint64    `json:"seq"`
	DesiredSeq uint64    `json:"desired_seq"`
	Op         events.Op `json:"op"`
	Reason     string    `json:"reason"`
	At         time.Time `json:"at"`
}

// HoldInForce is the guest's hold that still stands: journalled for its
// current desired revision and not yet released by an approval
// journalled after it (the guest's own or the cluster's). It is nil when
// there is none, and released reports an approved one.
func (v *View) HoldInForce(c *ClusterState) (h *Hold, released bool) {
	h = v.Held
	if h == nil || v.Desired == nil || h.DesiredSeq != v.DesiredSeq {
		return nil, false
	}
	if a := v.ApprovedAt(c); a != nil && a.Seq > h.Seq {
		return h, true
	}
	return h, false
}

// noteGone records an adopted reading at seq that found the guest gone.
func (v *View) noteGone(seq uint64) {
	if v.Observed != nil && !v.Observed.Exists {
		v.GoneSeq = seq
	}
}

// DestroyApproved reports whether an approval naming the guest opens the
// destroy gate: journalled after its absent revision and after the guest
// was last found gone (an approval is for the guest that existed then).
func (v *View) DestroyApproved() bool {
	return v.Approved != nil && v.Approved.Seq > v.DesiredSeq && v.Approved.Seq > v.GoneSeq
}

// Mark records a journalled operator request: where, who, when.
type Mark struct {
	Seq uint64    `json:"seq"`
	By  string    `json:"by"`
	At  time.Time `json:"at"`
}

// Loss is a managed guest that the observer found gone.
type Loss struct {
	VMID int       `json:"vmid"`
	Seq  uint64    `json:"seq"`
	At   time.Time `json:"at"`
}

// MaxLosses bounds ClusterState.Losses: only the newest are kept, more
// than any guard threshold needs.
const MaxLosses = 1024

// BurstWindow is the window of View.Burst.
const BurstWindow = 10 * time.Minute

// Rejection records an invalid desired event.
type Rejection struct {
	Seq       uint64    `json:"seq"`
	Reason    string    `json:"reason"`
	Publisher string    `json:"publisher,omitempty"`
	At        time.Time `json:"at"`
}

// ClusterState is what the observers last reported.
type ClusterState struct {
	Cluster      string        `json:"cluster"`
	HeartbeatAt  time.Time     `json:"heartbeat_at,omitzero"`
	HeartbeatSeq uint64        `json:"heartbeat_seq,omitempty"`
	Reachable    bool          `json:"reachable"`
	Error        string        `json:"error,omitempty"`
	Interval     time.Duration `json:"interval_ns,omitempty"`
	// VerifyPeriod is the observer's bound on how long a guest's config
	// goes unread (events.Heartbeat.VerifyPeriod).
	VerifyPeriod time.Duration `json:"verify_period_ns,omitempty"`
	// PVE is what the observer last found the cluster runs (its release,
	// and whether HA rules are in force), nil until it read it.
	PVE       *events.PVEFacts `json:"pve,omitempty"`
	ResyncSeq uint64           `json:"resync_seq,omitempty"`
	ResyncAt  time.Time        `json:"resync_at,omitzero"`
	// PausedAll is `converge pause --all` in force; ApprovedAll the newest
	// `converge approve --all`.
	PausedAll   *Mark `json:"paused_all,omitempty"`
	ApprovedAll *Mark `json:"approved_all,omitempty"`
	// Losses are the newest managed guests the observer found gone, in
	// journal order (the mass-change guard's inventory check).
	Losses []Loss `json:"losses,omitempty"`
	// PassAfterSeq is the newest reachable observer pass's AfterSeq
	// (events.Heartbeat): the inventory it read included every guest
	// journalled by then.
	PassAfterSeq uint64 `json:"pass_after_seq,omitempty"`
	// Unread are the guests that pass listed but could not read, sorted:
	// they exist though nothing of them is journalled.
	Unread []int `json:"unread,omitempty"`
	// Templates are the templates the inventory holds, by vmid: what
	// missing guests are cloned from. The map is replaced, never changed
	// in place (snapshots share it).
	Templates map[int]Template `json:"templates,omitempty"`
}

// Template is a template guest as last observed.
type Template struct {
	Node string           `json:"node"`
	Kind events.GuestKind `json:"kind"`
	// Storage is where its first disk lives ("" when unknown): a full
	// clone without clone.storage allocates there.
	Storage string `json:"storage,omitempty"`
}

// TemplateStorage is the storage of a template's first disk (by key
// order, CD-ROMs and drives without a volume aside), "" when none.
func TemplateStorage(o *events.Observed) string {
	keys := make([]string, 0, len(o.Config.Disks))
	for k, d := range o.Config.Disks {
		if d.Media == "" && d.Storage() != "" {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return ""
	}
	slices.Sort(keys)
	return o.Config.Disks[keys[0]].Storage()
}

// Missing reports whether the guest does not exist in Proxmox: the observer
// found it gone, or a pass that began after its desired state was
// journalled listed no such guest.
func (v *View) Missing(c *ClusterState) bool {
	if v.Observed != nil {
		return !v.Observed.Exists
	}
	if _, unread := slices.BinarySearch(c.Unread, v.VMID); unread {
		return false
	}
	return v.RefusedObservation == nil && v.Desired != nil && c.PassAfterSeq >= v.DesiredSeq
}

// ApprovedAt is the newest approval covering the guest: its own or the
// cluster's, nil when none.
func (v *View) ApprovedAt(c *ClusterState) *Mark {
	a, b := v.Approved, c.ApprovedAll
	switch {
	case a == nil:
		return b
	case b == nil || a.Seq > b.Seq:
		return a
	}
	return b
}

// BasisSeq is the observation sequence an action planned now is based on.
func (v *View) BasisSeq() uint64 {
	return max(v.ObservedSeq, v.ObservedEventSeq)
}

// Clone returns a deep enough copy for handing a view to another goroutine:
// the event values it points to are never mutated after folding.
func (v *View) Clone() *View {
	c := *v
	return &c
}
