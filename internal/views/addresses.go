package views

import (
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/projector"
)

// AddressesSummary is what the guest agent last reported of the guest's
// addresses (informational: nothing is planned from it).
type AddressesSummary struct {
	// Known: the agent answered, and Addresses is what it reported.
	// Otherwise Reason says why they are unknown.
	Known     bool                  `json:"known"`
	Reason    string                `json:"reason,omitempty"`
	Addresses []events.GuestAddress `json:"addresses"`
	ReadAt    time.Time             `json:"read_at"`
	// Seq is the journal sequence of the report.
	Seq uint64 `json:"seq"`
}

// addressesOf summarises a view's addresses, nil when none were reported.
func addressesOf(v *projector.View) *AddressesSummary {
	a := v.Addresses
	if a == nil {
		return nil
	}
	s := &AddressesSummary{Known: a.Known, Reason: a.Reason, Addresses: a.Addresses, ReadAt: a.ReadAt, Seq: v.AddressesSeq}
	if s.Addresses == nil {
		s.Addresses = []events.GuestAddress{}
	}
	return s
}
