package views

import (
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/planner"
)

// Summary is a guest's status as the CLI and the HTTP API show it.
type Summary struct {
	VMID    int                `json:"vmid"`
	Cluster string             `json:"cluster"`
	State   planner.StatusKind `json:"state"`
	Reason  string             `json:"reason,omitempty"`
	// AwaitsApproval is the approval the guest waits for ("guard",
	// "destroy"), omitted when none: the console lists them in one place.
	AwaitsApproval planner.Approval `json:"awaits_approval,omitempty"`
	Drift          []string         `json:"drift,omitempty"`
	Desired        *events.Desired  `json:"desired,omitempty"`
	Revision       uint64           `json:"desired_revision,omitempty"`
	Publisher      string           `json:"publisher,omitempty"`
	// SignedBy is the trusted key that signed the desired state (signed
	// mode); without it, Publisher is the publisher's unverified claim
	// unless it names a token ("token:…", authenticated by the HTTP API).
	SignedBy string           `json:"signed_by,omitempty"`
	Observed *ObservedSummary `json:"observed,omitempty"`
	// Addresses are the guest agent's (addresses.go), when reported.
	Addresses *AddressesSummary `json:"addresses,omitempty"`
	Next      []planner.Step    `json:"next,omitempty"`
	Last      *ActionSummary    `json:"last_action,omitempty"`
	LastError string            `json:"last_error,omitempty"`
	RetryAt   time.Time         `json:"retry_at,omitzero"`
	DesiredAt time.Time         `json:"desired_at,omitzero"`
	UpdatedAt time.Time         `json:"updated_at"`
}

// ObservedSummary is what Proxmox last showed.
type ObservedSummary struct {
	Exists bool             `json:"exists"`
	Node   string           `json:"node,omitempty"`
	Kind   events.GuestKind `json:"kind,omitempty"`
	Status string           `json:"status,omitempty"`
	Lock   string           `json:"lock,omitempty"`
	// HA is the state the HA manager keeps the guest in ("" when HA does
	// not manage it); Pool its resource pool.
	HA string `json:"ha,omitempty"`
	// HARule is the HA node-affinity rule that places the guest under HA
	// rules (events.HAPlacement), "" for none.
	HARule  string             `json:"ha_rule,omitempty"`
	Pool    string             `json:"pool,omitempty"`
	Config  events.GuestConfig `json:"config"`
	Pending map[string]string  `json:"pending,omitempty"`
	ReadAt  time.Time          `json:"read_at"`
}

// ActionSummary is the last action and what became of it.
type ActionSummary struct {
	ID       string              `json:"id"`
	Op       events.Op           `json:"op"`
	Reason   string              `json:"reason"`
	Result   events.ResultStatus `json:"result,omitempty"`
	UPID     string              `json:"upid,omitempty"`
	Error    string              `json:"error,omitempty"`
	Warnings int                 `json:"warnings,omitempty"`
	At       time.Time           `json:"at"`
}

// Summarise turns a materialised document into a summary.
func Summarise(d *GuestDoc) Summary {
	v := d.View
	s := Summary{VMID: v.VMID, Cluster: v.Cluster, State: d.Status.Kind, Reason: d.Status.Reason, Drift: d.Status.Drift,
		Desired: v.Desired, Revision: v.DesiredSeq, Publisher: v.Publisher, SignedBy: v.SignedBy, Next: d.Next, LastError: v.LastError,
		RetryAt: d.Status.RetryAt, DesiredAt: v.DesiredAt, UpdatedAt: d.UpdatedAt, Addresses: addressesOf(v),
		AwaitsApproval: d.Status.Awaits}
	if s.State == planner.Held && s.AwaitsApproval == "" {
		s.AwaitsApproval = planner.AwaitsGuard // a document an older planner wrote
	}
	if o := v.Observed; o != nil {
		s.Observed = &ObservedSummary{Exists: o.Exists, Node: o.Node, Kind: o.Kind, Status: o.Status, Lock: o.Lock,
			HA: o.HA, HARule: haRule(o), Pool: o.Pool, Config: o.Config, Pending: o.Pending, ReadAt: o.ReadAt}
	}
	if a := v.LastAction; a != nil {
		as := &ActionSummary{ID: a.ID, Op: a.Op, Reason: a.Reason, At: a.Time}
		if v.Started != nil && v.Started.ActionID == a.ID {
			as.Result, as.UPID = v.Started.Status, v.Started.UPID
		}
		if r := v.LastResult; r != nil && r.ActionID == a.ID {
			as.Result, as.UPID, as.Error, as.Warnings = r.Status, r.UPID, r.Error, r.Warnings
			if as.Error == "" && r.Reason != "" && r.Status == events.ResultSkipped {
				as.Error = r.Reason
			}
		}
		s.Last = as
	}
	return s
}

// haRule is the rule placing an HA guest, "" for none.
func haRule(o *events.Observed) string {
	if o.HAPlacement == nil {
		return ""
	}
	return o.HAPlacement.Rule
}
