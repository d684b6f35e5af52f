package audit

import (
	"strings"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/projector"
)

// addresses fills a timeline entry for the guest agent's addresses: each
// journalled report is a change (the observer publishes only changes).
func (t *timeline) addresses(e *Entry, ev projector.Event) {
	a, err := events.Decode[events.Addresses](ev.Data)
	if err != nil {
		e.Error, e.Summary = err.Error(), "undecodable addresses"
		return
	}
	e.Who, e.Addresses, e.Summary = a.Publisher, &a, DescribeAddresses(&a)
}

// DescribeAddresses says in one line what a guest agent reported:
// "guest agent addresses: eth0 192.0.2.5/24, eth0 fd00::5/64", "… none",
// or "guest agent addresses unknown: REASON".
func DescribeAddresses(a *events.Addresses) string {
	if !a.Known {
		if a.Reason == "" {
			return "guest agent addresses unknown"
		}
		return "guest agent addresses unknown: " + a.Reason
	}
	if len(a.Addresses) == 0 {
		return "guest agent addresses: none"
	}
	parts := make([]string, len(a.Addresses))
	for i, x := range a.Addresses {
		parts[i] = x.String()
	}
	return "guest agent addresses: " + strings.Join(parts, ", ")
}
