package projector_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/projector"
)

// TestAddressesFoldInformational: a guest agent's addresses land in
// View.Addresses (with the event's sequence) and nowhere else: the
// observation, its sequences, the basis of the next action and the
// in-flight action stay as they were, and the change is reported as
// informational (Change.Info), not as a change to plan (Change.View).
// An undecodable one makes no phantom guest; a snapshot keeps them.
func TestAddressesFoldInformational(t *testing.T) {
	at := time.Date(2026, 11, 27, 6, 0, 0, 0, time.UTC)
	p := projector.New("pve")
	mk := func(seq uint64, kind events.Kind, vmid int, v any) projector.Event {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return projector.Event{Seq: seq, Subject: events.Subject(kind, "pve", vmid), Data: b, Time: at}
	}
	p.Apply(mk(1, events.KindObserved, 101, events.Observed{VMID: 101, Cluster: "pve", Exists: true, Node: "pve1",
		Kind: events.QEMU, Status: "running", ReadAt: at, AfterSeq: 0, Source: events.SourceObserver}))
	p.Apply(projector.Event{Seq: 2, Subject: events.Subject(events.KindDesired, "pve", 101), Data: []byte(`{"vmid":101,"power":"stopped"}`), Time: at})
	p.Apply(mk(3, events.KindAction, 101, events.Action{ID: "a1", VMID: 101, Cluster: "pve", Node: "pve1", Op: events.OpShutdown,
		DesiredSeq: 2, BasisSeq: 1}))
	v := p.Views[101]
	before := *v
	ch := p.Apply(mk(4, events.KindAddresses, 101, events.Addresses{VMID: 101, Cluster: "pve", Known: true,
		Addresses: []events.GuestAddress{{Interface: "eth0", Address: "192.0.2.5", Prefix: 24}}, ReadAt: at.Add(time.Hour)}))
	if ch.Err != nil || ch.View != nil || ch.Info != v {
		t.Fatalf("change %+v", ch)
	}
	if v.Addresses == nil || v.AddressesSeq != 4 || v.Addresses.Addresses[0].Address != "192.0.2.5" || v.Seq != 4 {
		t.Fatalf("addresses not folded: %+v seq %d", v.Addresses, v.AddressesSeq)
	}
	if v.Observed != before.Observed || v.ObservedSeq != 1 || v.ObservedEventSeq != before.ObservedEventSeq || v.BasisSeq() != 1 ||
		v.InFlight != before.InFlight || v.InFlightSeq != 3 || v.GoneSeq != 0 || v.RefusedObservation != nil {
		t.Fatalf("addresses changed more than the addresses: %+v", v)
	}
	// Unknown now: replaces the report.
	p.Apply(mk(5, events.KindAddresses, 101, events.Addresses{VMID: 101, Cluster: "pve", Reason: "guest not running", ReadAt: at}))
	if v.Addresses.Known || v.Addresses.Reason != "guest not running" || v.AddressesSeq != 5 {
		t.Fatalf("unknown: %+v", v.Addresses)
	}
	// Undecodable, for a guest never seen: an error, no view.
	if ch := p.Apply(projector.Event{Seq: 6, Subject: events.Subject(events.KindAddresses, "pve", 999), Data: []byte(`{`)}); ch.Err == nil || p.Views[999] != nil {
		t.Fatalf("undecodable: %+v, view %v", ch, p.Views[999])
	}
	s := p.Snapshot()
	r, err := projector.Restore(s, "pve", nil)
	if err != nil || r.Views[101].Addresses == nil || r.Views[101].AddressesSeq != 5 {
		t.Fatalf("restore: %v %+v", err, r.Views[101])
	}
}
