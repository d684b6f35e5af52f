package events_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
)

// TestAddressesSubject: addresses travel on pve.addresses.<cluster>.<vmid>
// and are stored with the guest's partition, like the other guests' events.
func TestAddressesSubject(t *testing.T) {
	if got := events.Subject(events.KindAddresses, "pve", 101); got != "pve.addresses.pve.101" {
		t.Fatalf("subject %q", got)
	}
	for s, want := range map[string]events.SubjectInfo{
		"pve.addresses.pve.101":   {Kind: events.KindAddresses, Cluster: "pve", VMID: 101, Partition: -1},
		"pve.addresses.lab.200.7": {Kind: events.KindAddresses, Cluster: "lab", VMID: 200, Partition: 7},
	} {
		got, err := events.ParseSubject(s)
		if err != nil || got != want {
			t.Errorf("ParseSubject(%q) = %+v, %v; want %+v", s, got, err, want)
		}
	}
	for _, s := range []string{"pve.addresses.pve", "pve.addresses.pve.99", "pve.addresses.pve.101.1.2"} {
		if _, err := events.ParseSubject(s); err == nil {
			t.Errorf("ParseSubject(%q) accepted", s)
		}
	}
	if events.KindAddresses.ClusterWide() {
		t.Fatal("addresses are a guest's")
	}
}

// TestAddressesRoundTrip: an addresses event comes back from Encode →
// Decode unchanged, encodes as encoding/json does, and a body of a newer
// converge with members this one does not know (top level and in an
// address) decodes to the fields it knows, as encoding/json reads it.
func TestAddressesRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 27, 6, 0, 0, 0, time.UTC)
	a := events.Addresses{Meta: events.NewMeta("observer@h", "", at), VMID: 101, Cluster: "pve", Known: true,
		Addresses: []events.GuestAddress{{Interface: "eth0", Address: "192.0.2.50", Prefix: 24, MAC: "bc:24:11:0a:0b:0c"}},
		ReadAt:    at}
	body, err := events.Encode(a)
	if err != nil {
		t.Fatal(err)
	}
	std, _ := json.Marshal(a)
	if string(body) != string(std) {
		t.Fatalf("Encode %s\nencoding/json %s", body, std)
	}
	got, err := events.Decode[events.Addresses](body)
	if err != nil || !reflect.DeepEqual(got, a) {
		t.Fatalf("round trip: %+v %v", got, err)
	}

	newer := `{"schema":2,"publisher":"observer@h","time":"2026-11-27T06:00:00Z","vmid":101,"cluster":"pve",` +
		`"known":true,"agent_version":"9.1","addresses":[{"interface":"eth0","address":"192.0.2.50","prefix":24,` +
		`"scope":"global","dad":{"ok":true}}],"read_at":"2026-11-27T06:00:00Z","zz":[1,2]}`
	want := events.Addresses{Meta: events.Meta{Schema: 2, Publisher: "observer@h", Time: at}, VMID: 101, Cluster: "pve",
		Known: true, Addresses: []events.GuestAddress{{Interface: "eth0", Address: "192.0.2.50", Prefix: 24}}, ReadAt: at}
	got, err = events.Decode[events.Addresses]([]byte(newer))
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("unknown members: %+v %v", got, err)
	}
	var sa events.Addresses
	if err := json.Unmarshal([]byte(newer), &sa); err != nil || !reflect.DeepEqual(sa, want) {
		t.Fatalf("encoding/json reads %+v %v", sa, err)
	}
}

// TestNormaliseAddresses: sorted by interface then address, canonical
// text, duplicates once; loopback, unspecified, IPv6 link-local and
// unparsable addresses left out (an IPv4 link-local 169.254/16 stays: it
// is what a guest without DHCP answer holds, worth seeing).
func TestNormaliseAddresses(t *testing.T) {
	in := []events.GuestAddress{
		{Interface: "lo", Address: "127.0.0.1", Prefix: 8},
		{Interface: "lo", Address: "::1", Prefix: 128},
		{Interface: "eth1", Address: "10.1.2.3", Prefix: 24},
		{Interface: "eth0", Address: "fe80::be24:11ff:fe0a:b0c", Prefix: 64},
		{Interface: "eth0", Address: "FD00:0::50", Prefix: 64},
		{Interface: "eth0", Address: "192.0.2.50", Prefix: 24},
		{Interface: "eth0", Address: "192.0.2.50", Prefix: 24},
		{Interface: "eth0", Address: "not-an-ip", Prefix: 24},
		{Interface: "eth2", Address: "0.0.0.0", Prefix: 0},
		{Interface: "eth2", Address: "169.254.1.2", Prefix: 16},
	}
	want := []events.GuestAddress{
		{Interface: "eth0", Address: "192.0.2.50", Prefix: 24},
		{Interface: "eth0", Address: "fd00::50", Prefix: 64},
		{Interface: "eth1", Address: "10.1.2.3", Prefix: 24},
		{Interface: "eth2", Address: "169.254.1.2", Prefix: 16},
	}
	if got := events.NormaliseAddresses(in); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if s := want[1].String(); s != "eth0 fd00::50/64" {
		t.Fatalf("String %q", s)
	}
	if s := (events.GuestAddress{Interface: "eth0", Address: "192.0.2.1", Prefix: -1}).String(); s != "eth0 192.0.2.1" {
		t.Fatalf("String without prefix %q", s)
	}
	a := &events.Addresses{Known: true, Addresses: want, Reason: "x"}
	b := &events.Addresses{Known: true, Addresses: append([]events.GuestAddress(nil), want...), ReadAt: time.Now()}
	if !events.SameAddresses(a, b) || events.SameAddresses(a, &events.Addresses{Known: true}) ||
		events.SameAddresses(&events.Addresses{}, &events.Addresses{Known: true}) || events.SameAddresses(a, nil) {
		t.Fatal("SameAddresses")
	}
}
