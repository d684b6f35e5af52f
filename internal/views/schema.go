package views

import (
	"strconv"
	"strings"
	"time"

	"github.com/converge-pve/converge/planner"
	"github.com/converge-pve/converge/projector"
)

// GuestDoc is the document a planner writes per guest: the view and the
// decision made from it.
type GuestDoc struct {
	View      *projector.View `json:"view"`
	Status    planner.Status  `json:"status"`
	Next      []planner.Step  `json:"next,omitempty"`
	UpdatedAt time.Time       `json:"updated_at"`
	// Truncated is set when the document was cut down to MaxDocBytes.
	Truncated bool `json:"truncated,omitempty"`
}

// ClusterDoc is the cluster's document: the observers' state, the journal
// sequence the planner's documents reflect, and the policy it plans with
// (so that a dry run decides as it does).
type ClusterDoc struct {
	State projector.ClusterState `json:"state"`
	Seq   uint64                 `json:"seq"`
	// Guests is how many guests the planner's fold holds as of Seq: the
	// documents a complete bucket has.
	Guests  int             `json:"guests"`
	Planner string          `json:"planner"`
	Policy  *planner.Policy `json:"policy,omitempty"`
	// Limits are the safety limits it applies (the mass-change guard,
	// node slots), so that `converge plan -f` holds what it would hold;
	// nil from a planner too old to publish them.
	Limits    *planner.Limits `json:"limits,omitempty"`
	UpdatedAt time.Time       `json:"updated_at"`
}

// ClusterKey is the bucket key of the cluster document.
func ClusterKey(cluster string) string { return cluster + "._cluster" }

// GuestKey is the bucket key of a guest's document.
func GuestKey(cluster string, vmid int) string { return cluster + "." + strconv.Itoa(vmid) }

// guestKey reports whether a bucket key is a guest document's key
// (<cluster>.<vmid>), not the cluster document or anything else.
func guestKey(k string) bool {
	_, err := strconv.Atoi(k[strings.LastIndexByte(k, '.')+1:])
	return err == nil
}
