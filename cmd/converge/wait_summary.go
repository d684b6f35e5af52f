package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
)

// What wait reports of the guests it stops at: failed, released, waiting
// for an operator, and a short summary of many.

func failed(d *views.GuestDoc) bool {
	return d.Status.Kind == planner.Error || d.Status.Kind == planner.Rejected
}

// isReleased reports a guest released after its desired revision rev.
func isReleased(d *views.GuestDoc, rev uint64) bool {
	v := d.View
	return v.Released != nil && v.Released.Seq > rev && v.Desired == nil && v.Rejected == nil
}

// operatorOnly names what a guest waits for that only an operator can
// give ("" when nothing): an approval of a hold, a resume, an approval of
// a gated destroy, a restart under restart: never. planner.Status carries
// no such mark, so it is read from the state and the reason as the
// planner words them (planner/limits.go, lifecycle.go, plan.go, whole.go).
func operatorOnly(d *views.GuestDoc) string {
	s := d.Status
	switch {
	case s.Kind == planner.Held:
		return "held by the mass-change guard (`converge approve VMID`, or --all)"
	case s.Kind == planner.Paused:
		return "paused (`converge resume VMID`, or --all)"
	case s.Kind == planner.Blocked && d.View.Desired != nil && d.View.Desired.Absent && strings.HasPrefix(s.Reason, "desired absent"):
		return "a destroy behind its gate (`converge approve VMID`; a protected guest: protection off in Proxmox)"
	case s.Kind == planner.Pending && len(d.Next) == 0 && strings.Contains(s.Reason, "waits for a restart (restart: never"):
		return "a change that waits for a restart under restart: never (restart the guest, or desire restart: allowed)"
	}
	return ""
}

// Bounds of what a stopped wait prints: a line per failed guest, a line
// per operator's condition, each reason cut, so that a mass failure reads
// as a summary, not as kilobytes on one line.
const (
	maxListed    = 10
	maxReasonLen = 240
)

// stopError is the error a wait stops with when a guest of ids failed
// (exit 4, operator's conditions listed after the failures) or waits for
// an operator (exit 5); nil when none does.
func stopError(ids []int, state map[int]views.GuestDoc) error {
	var fails, order []string
	byWhat := map[string][]int{}
	for _, id := range ids {
		d, ok := state[id]
		if !ok {
			continue
		}
		if failed(&d) {
			fails = append(fails, fmt.Sprintf("guest %d is %s: %s", id, d.Status.Kind, cut(reasonOf(d))))
		} else if what := operatorOnly(&d); what != "" {
			if byWhat[what] == nil {
				order = append(order, what)
			}
			byWhat[what] = append(byWhat[what], id)
		}
	}
	if len(fails) == 0 && len(order) == 0 {
		return nil
	}
	lines := slices.Clone(fails[:min(len(fails), maxListed)])
	if n := len(fails) - maxListed; n > 0 {
		lines = append(lines, fmt.Sprintf("… and %d more in error or rejected (converge status --state error,rejected)", n))
	}
	for i, what := range order {
		if i == 0 {
			n := 0
			for _, gs := range byWhat {
				n += len(gs)
			}
			lines = append(lines, fmt.Sprintf("%d guest(s) wait for an operator:", n))
		}
		gs := byWhat[what]
		lines = append(lines, fmt.Sprintf("  %s: %s\n    guest %d: %s", what, vmidList(gs), gs[0], cut(reasonOf(state[gs[0]]))))
	}
	code := exitNeedsOperator
	if len(fails) > 0 {
		code = exitGuestFailed
	}
	return exitCode{code, errors.New(strings.Join(lines, "\n"))}
}

// vmidList lists vmids, at most 20 of them.
func vmidList(ids []int) string {
	s := strings.Trim(fmt.Sprint(ids[:min(len(ids), 20)]), "[]")
	if len(ids) > 20 {
		s += fmt.Sprintf(" and %d more", len(ids)-20)
	}
	return s
}

// cut shortens a reason to maxReasonLen runes.
func cut(s string) string {
	if r := []rune(s); len(r) > maxReasonLen {
		return string(r[:maxReasonLen]) + "…"
	}
	return s
}

// reasonOf is a guest's status reason with its last error, as status
// shows it.
func reasonOf(d views.GuestDoc) string { return rowOf(views.Summarise(&d)).reason }
