package events

import (
	"cmp"
	"net/netip"
	"slices"
	"strconv"
	"time"
)

// KindAddresses is the kind of a guest's guest-agent addresses
// (pve.addresses.<cluster>.<vmid>): informational, journalled apart from
// the observations actions are planned from and fenced on.
const KindAddresses Kind = "addresses"

// Addresses is what a QEMU guest's agent last reported of its network
// addresses (GET …/agent/network-get-interfaces), as the observer read
// it. It is informational: it never supersedes an action's basis, never
// fences anything and plans nothing. The observer publishes one when the
// set changes: a new set read, or the addresses becoming unknown (the
// guest stopped, its agent disabled or not answering, the guest gone).
type Addresses struct {
	Meta
	VMID    int    `json:"vmid"`
	Cluster string `json:"cluster"`
	// Known is true when the agent answered: Addresses is then what it
	// reported (possibly none). False: the addresses are unknown, and
	// Reason says why ("guest not running", "QEMU guest agent is not
	// running", …).
	Known  bool   `json:"known"`
	Reason string `json:"reason,omitempty"`
	// Addresses are sorted by interface, then address; loopback
	// interfaces and addresses and IPv6 link-local addresses are left
	// out ([NormaliseAddresses]).
	Addresses []GuestAddress `json:"addresses,omitempty"`
	// ReadAt is when the agent was asked, on the reader's clock: shown to
	// people, never used to order anything.
	ReadAt time.Time `json:"read_at"`
}

// GuestAddress is one address an interface of the guest holds.
type GuestAddress struct {
	// Interface is the guest's name for it (eth0, ens18, …).
	Interface string `json:"interface"`
	// Address is the IP address in its canonical text form.
	Address string `json:"address"`
	// Prefix is the prefix length (-1 when the agent did not say).
	Prefix int `json:"prefix"`
	// MAC is the interface's hardware address, lower case, "" if unknown.
	MAC string `json:"mac,omitempty"`
}

// String is "eth0 192.0.2.5/24".
func (a GuestAddress) String() string {
	s := a.Interface + " " + a.Address
	if a.Prefix >= 0 {
		s += "/" + strconv.Itoa(a.Prefix)
	}
	return s
}

// NormaliseAddresses returns the addresses worth showing, sorted by
// interface and address, without duplicates: an address that does not
// parse, a loopback one (127.0.0.0/8, ::1), an unspecified one and an
// IPv6 link-local one (fe80::/10, which every interface has and which
// says nothing of where the guest is reachable) are left out. Addresses
// are written in canonical form (netip).
func NormaliseAddresses(in []GuestAddress) []GuestAddress {
	out := make([]GuestAddress, 0, len(in))
	for _, a := range in {
		ip, err := netip.ParseAddr(a.Address)
		if err != nil {
			continue
		}
		ip = ip.Unmap()
		if ip.IsLoopback() || ip.IsUnspecified() || ip.Is6() && ip.IsLinkLocalUnicast() {
			continue
		}
		a.Address = ip.WithZone("").String()
		out = append(out, a)
	}
	slices.SortFunc(out, compareAddress)
	return slices.CompactFunc(out, func(a, b GuestAddress) bool { return compareAddress(a, b) == 0 })
}

func compareAddress(a, b GuestAddress) int {
	return cmp.Or(cmp.Compare(a.Interface, b.Interface), cmp.Compare(a.Address, b.Address),
		cmp.Compare(a.Prefix, b.Prefix), cmp.Compare(a.MAC, b.MAC))
}

// SameAddresses reports whether two reports say the same (Meta, ReadAt
// and Reason aside): what the observer compares before publishing.
func SameAddresses(a, b *Addresses) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Known == b.Known && slices.Equal(a.Addresses, b.Addresses)
}
