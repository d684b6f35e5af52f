package pvesim

import (
	"sort"
	"strconv"
	"strings"
)

// The QEMU guest agent: qemu-server's API2/Qemu/Agent.pm commands, which
// load the config and call QemuServer/Agent.pm's assert_agent_available
// before the guest's qemu-ga answers.

// agentNetworkInterfaces is GET …/qemu/{vmid}/agent/network-get-interfaces:
// {"result": guest-network-get-interfaces}. assert_agent_available's
// refusals, in its order: no agent key (500 "No QEMU guest agent
// configured"), the VM not running ("VM <vmid> is not running"), qemu-ga
// not answering guest-ping ("QEMU guest agent is not running": the agent
// disabled, so the VM has no agent channel, or the VM paused). A running
// VM with the agent enabled runs qemu-ga: lo, then eth<N> for each netN
// with its MAC in lower case, the address of its cloud-init ipconfigN (a
// DHCP lease for ip=dhcp or no ipconfigN) and the EUI-64 link-local one.
func (s *Sim) agentNetworkInterfaces(q *req, g *guest) (any, error) {
	if err := noExtraParams(q); err != nil {
		return nil, err
	}
	agent, ok := g.conf["agent"]
	if !ok {
		return nil, fail500("No QEMU guest agent configured")
	}
	if !g.running() {
		return nil, fail500("VM %d is not running", g.vmid)
	}
	m, _ := propList(agent, "enabled")
	if b, ok := parsePropBool(m["enabled"]); !ok || !b || g.paused {
		return nil, fail500("QEMU guest agent is not running")
	}
	out := []any{qgaIface("lo", "00:00:00:00:00:00", [][3]any{{"ipv4", "127.0.0.1", 8}, {"ipv6", "::1", 128}})}
	var nets []int
	for k := range g.conf {
		if rest, ok := strings.CutPrefix(k, "net"); ok {
			if n, err := strconv.Atoi(rest); err == nil {
				nets = append(nets, n)
			}
		}
	}
	sort.Ints(nets)
	for _, n := range nets {
		nic, ok := propList(g.conf["net"+strconv.Itoa(n)], "model")
		if !ok {
			continue
		}
		var mac string
		for k, v := range nic {
			if qemuNICModels[k] {
				mac = v
			}
		}
		if mac == "" {
			mac = nic["macaddr"]
		}
		mac = strings.ToLower(mac)
		ipc, _ := propList(g.conf["ipconfig"+strconv.Itoa(n)], "")
		addrs := nicAddrs(ipc["ip"], ipc["ip6"], mac, ipc["ip"] == "" || ipc["ip"] == "dhcp", "ipv4", "ipv6")
		out = append(out, qgaIface("eth"+strconv.Itoa(n), mac, addrs))
	}
	return map[string]any{"result": out}, nil
}

// qgaIface is one GuestNetworkInterface of qemu-ga's
// guest-network-get-interfaces.
func qgaIface(name, mac string, addrs [][3]any) map[string]any {
	list := []map[string]any{}
	for _, a := range addrs {
		list = append(list, map[string]any{"ip-address-type": a[0], "ip-address": a[1], "prefix": a[2]})
	}
	return map[string]any{"name": name, "hardware-address": mac, "ip-addresses": list}
}

// nicAddrs lists a NIC's addresses as the guest reports them: its static
// IPv4 (or, with dhcp, a lease), its static IPv6 and its link-local
// address, each family named as the caller's API names it (v4, v6).
func nicAddrs(ip, ip6, mac string, dhcp bool, v4, v6 string) [][3]any {
	var addrs [][3]any
	if a, p, ok := strings.Cut(ip, "/"); ok {
		pl, _ := strconv.Atoi(p)
		addrs = append(addrs, [3]any{v4, a, pl})
	} else if dhcp {
		addrs = append(addrs, [3]any{v4, dhcpLease(mac), 24})
	}
	if a, p, ok := strings.Cut(ip6, "/"); ok {
		pl, _ := strconv.Atoi(p)
		addrs = append(addrs, [3]any{v6, a, pl})
	}
	if ll := linkLocal(mac); ll != "" {
		addrs = append(addrs, [3]any{v6, ll, 64})
	}
	return addrs
}
