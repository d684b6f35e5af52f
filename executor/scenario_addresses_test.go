package executor

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/converge-pve/converge/events"
)

// addresses journals the guest agent's addresses of a guest, read now
// (testdata/addresses.txtar).
func (h *xharness) addresses(args []string) (string, error) {
	vmid, err := strconv.Atoi(args[0])
	if err != nil {
		return "", err
	}
	a := events.Addresses{Meta: events.NewMeta("observer@test", "", h.clk.Now()), VMID: vmid, Cluster: "pve", Known: true,
		ReadAt: h.clk.Now(), Addresses: []events.GuestAddress{{Interface: "eth0", Address: "192.0.2." + strconv.Itoa(vmid%250), Prefix: 24}}}
	body, err := json.Marshal(a)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("addresses %d\n", h.publish(events.KindAddresses, vmid, nil, body)), nil
}
