package planner

import (
	"fmt"
	"time"

	"github.com/converge-pve/converge/events"
)

// StatusKind is a guest's state as converge reports it.
type StatusKind string

// Guest states (docs/architecture.md; `converge status`).
const (
	Converged StatusKind = "converged"
	Pending   StatusKind = "pending"
	Acting    StatusKind = "acting"
	Error     StatusKind = "error"
	Blocked   StatusKind = "blocked"
	Rejected  StatusKind = "rejected"
	Unmanaged StatusKind = "unmanaged"
	// Held: a disruptive action waits for `converge approve` (the
	// mass-change guard).
	Held StatusKind = "held"
	// Paused: `converge pause` is in force for the guest.
	Paused StatusKind = "paused"
	// Absent: the guest does not exist, as desired (converged).
	Absent StatusKind = "absent"
)

// StatusKinds lists every state, in the order status tables show them.
var StatusKinds = []StatusKind{Converged, Absent, Pending, Acting, Held, Paused, Error, Blocked, Rejected, Unmanaged}

// Done reports whether the guest is as desired (converged or absent).
func (k StatusKind) Done() bool { return k == Converged || k == Absent }

// settled reports a state `converge wait` stops on: done, or one that
// needs someone (error, rejected, held, paused, blocked).
func (k StatusKind) settled() bool { return k != Pending && k != Acting && k != Unmanaged }

// Status is a guest's state with the reason for it.
type Status struct {
	Kind   StatusKind `json:"state"`
	Reason string     `json:"reason,omitempty"`
	// Drift lists the differences between desired and observed.
	Drift []string `json:"drift,omitempty"`
	// RetryAt is when a failed guest is tried again.
	RetryAt time.Time `json:"retry_at,omitzero"`
	// Limit names the limit a pending guest waits for ("node",
	// "storage", "create_rate", "max_guests"), for metrics.
	Limit string `json:"limit,omitempty"`
	// Awaits names the approval (`converge approve`) the guest waits
	// for, if any: a typed field, so that a console need not parse
	// Reason to offer it.
	Awaits Approval `json:"awaits_approval,omitempty"`
}

// Approval is what an operator's approval would release.
type Approval string

// Approvals a guest may wait for.
const (
	// AwaitsGuard: the mass-change guard holds a disruptive step (Held).
	AwaitsGuard Approval = "guard"
	// AwaitsDestroy: desired absent, the destroy gate is closed for the
	// guest (Blocked); `converge approve VMID` opens it for this guest.
	AwaitsDestroy Approval = "destroy"
)

// Step is one planned action, before the service gives it an id.
type Step struct {
	Op      events.Op         `json:"op"`
	Set     map[string]string `json:"set,omitempty"`
	Delete  []string          `json:"delete,omitempty"`
	Revert  []string          `json:"revert,omitempty"`
	Timeout time.Duration     `json:"timeout_ns,omitempty"`
	// Holds is what an OpHold step holds back.
	Holds events.Op `json:"holds,omitempty"`
	// Clone is what an OpClone step creates; Node and Kind are then the
	// new guest's (there is no observation to take them from).
	Clone *events.CloneOp `json:"clone,omitempty"`
	// Resize, Migrate, Pool, Snapshot, HAState and HARule are the
	// parameters of their operations, as the action carries them.
	Resize   *events.ResizeOp   `json:"resize,omitempty"`
	Migrate  *events.MigrateOp  `json:"migrate,omitempty"`
	Pool     *events.PoolOp     `json:"pool,omitempty"`
	Snapshot *events.SnapshotOp `json:"snapshot,omitempty"`
	HAState  string             `json:"ha_state,omitempty"`
	HARule   *events.HARuleOp   `json:"ha_rule,omitempty"`
	Node     string             `json:"node,omitempty"`
	Kind     events.GuestKind   `json:"kind,omitempty"`
	Reason   string             `json:"reason"`
}

// Decision is Plan's answer for one guest: its status and the ordered
// actions still needed. The service acts on Steps[0] only; the rest say
// what will follow.
type Decision struct {
	Status Status `json:"status"`
	Steps  []Step `json:"steps,omitempty"`
}

func decide(kind StatusKind, format string, a ...any) Decision {
	return Decision{Status: Status{Kind: kind, Reason: fmt.Sprintf(format, a...)}}
}
