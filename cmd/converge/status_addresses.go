package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/converge-pve/converge/internal/views"
)

// printAddresses is the detail `converge status VMID…` shows below the
// table for the guests named: what each guest's agent last reported of
// its addresses (the table has no column for them: a guest has several,
// and they are informational). Guests without a report are left out.
func printAddresses(w io.Writer, sums []views.Summary, now time.Time) {
	for _, s := range sums {
		if line := addressesLine(s.Addresses, now); line != "" {
			fmt.Fprintf(w, "%d %s\n", s.VMID, line)
		}
	}
}

// addressesLine is "guest agent addresses (read 5s ago): eth0
// 192.0.2.5/24, eth0 fd00::5/64", "… none", or "guest agent addresses
// unknown (REASON; 5s ago)"; "" without a report.
func addressesLine(a *views.AddressesSummary, now time.Time) string {
	if a == nil {
		return ""
	}
	when := age(now, a.ReadAt)
	if when != "now" && when != "never" {
		when += " ago"
	}
	switch {
	case !a.Known:
		return fmt.Sprintf("guest agent addresses unknown (%s; %s)", dash(a.Reason), when)
	case len(a.Addresses) == 0:
		return fmt.Sprintf("guest agent addresses (read %s): none", when)
	}
	parts := make([]string, len(a.Addresses))
	for i, x := range a.Addresses {
		parts[i] = x.String()
	}
	return fmt.Sprintf("guest agent addresses (read %s): %s", when, strings.Join(parts, ", "))
}
