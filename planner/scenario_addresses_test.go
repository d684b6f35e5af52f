package planner_test

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/converge-pve/converge/events"
)

// The scenario commands of guest agent addresses (testdata/addresses.txtar).

// addresses folds the guest agent's addresses of a guest, read now:
// IFACE=ADDR/PREFIX pairs, or "unknown REASON".
func (h *harness) addresses(args []string) (string, error) {
	vmid, err := vmidArg(args)
	if err != nil {
		return "", err
	}
	a := events.Addresses{Meta: events.NewMeta("observer@test", "", h.now), VMID: vmid, Cluster: "pve", Known: true, ReadAt: h.now}
	if len(args) > 1 && args[1] == "unknown" {
		a.Known, a.Reason = false, strings.Join(args[2:], " ")
	} else {
		for _, kv := range args[1:] {
			iface, cidr, ok := strings.Cut(kv, "=")
			addr, p, _ := strings.Cut(cidr, "/")
			prefix, err := strconv.Atoi(p)
			if !ok || err != nil {
				return "", fmt.Errorf("want IFACE=ADDR/PREFIX, got %q", kv)
			}
			a.Addresses = append(a.Addresses, events.GuestAddress{Interface: iface, Address: addr, Prefix: prefix})
		}
	}
	h.fold(events.KindAddresses, vmid, nil, mustJSON(a))
	return h.ready(), nil
}

// view prints what of a guest's view an action's basis and the
// executors' fences read, its in-flight action and its addresses.
func (h *harness) view(args []string) (string, error) {
	vmid, err := vmidArg(args)
	if err != nil {
		return "", err
	}
	s := h.e.FinalCheckpoint()
	if s == nil {
		return "", fmt.Errorf("no fold since the last checkpoint")
	}
	v := s.Views[vmid]
	if v == nil {
		return "no view\n", nil
	}
	inFlight := "none"
	if v.InFlight != nil {
		inFlight = v.InFlight.ID
	}
	addrs := "none"
	if a := v.Addresses; a != nil {
		var parts []string
		for _, x := range a.Addresses {
			parts = append(parts, x.String())
		}
		addrs = fmt.Sprintf("known=%t %q reason=%q (seq %d)", a.Known, strings.Join(parts, ", "), a.Reason, v.AddressesSeq)
	}
	return fmt.Sprintf("observed_seq=%d observed_event_seq=%d basis=%d in_flight=%s addresses=%s\n",
		v.ObservedSeq, v.ObservedEventSeq, v.BasisSeq(), inFlight, addrs), nil
}
