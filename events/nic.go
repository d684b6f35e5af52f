package events

import (
	"strconv"
	"strings"
)

// EditNIC is the netN value that gives interface key of a guest of kind
// what w asks for, starting from have: the interface's value as Proxmox
// prints it (QEMU "model=MAC" first, LXC "name=" first, then the other
// keys sorted; see internal/pve NIC.Format), "" for an interface that does
// not exist yet. Everything w leaves out is kept, above all the MAC: a new
// interface is written without one, and Proxmox generates it. The result
// is in the same canonical form, so a value Proxmox stored reads back
// equal and EditNIC(kind, key, EditNIC(…), w) is a fixed point.
func EditNIC(kind GuestKind, key, have string, w NetWant) string {
	first := ""
	kv := map[string]string{}
	if have != "" {
		for i, part := range strings.Split(have, ",") {
			if kind == QEMU && i == 0 {
				first = part
				continue
			}
			k, v, _ := strings.Cut(part, "=")
			kv[k] = v
		}
	}
	if kind == QEMU {
		model, mac, _ := strings.Cut(first, "=")
		if w.Model != "" {
			model = w.Model
		}
		if model == "" {
			model = "virtio" // Proxmox needs a model; the GUI's default
		}
		first = model
		if mac != "" {
			first += "=" + mac
		}
	} else {
		setStr(kv, "name", w.Name)
		if kv["name"] == "" {
			kv["name"] = "eth" + strings.TrimPrefix(key, "net")
		}
		setStr(kv, "ip", w.IP)
		setStr(kv, "gw", w.GW)
	}
	setStr(kv, "bridge", w.Bridge)
	if w.Tag != nil {
		setInt(kv, "tag", *w.Tag)
	}
	if w.MTU != nil {
		setInt(kv, "mtu", *w.MTU)
	}
	if w.Firewall != nil {
		switch {
		case *w.Firewall:
			kv["firewall"] = "1"
		case kv["firewall"] == "1":
			delete(kv, "firewall")
		}
	}
	if w.Rate != nil {
		// A rate written by hand as "10.0" is the same limit as 10.
		if old, err := strconv.ParseFloat(kv["rate"], 64); err != nil || old != *w.Rate {
			delete(kv, "rate")
			if *w.Rate > 0 {
				kv["rate"] = strconv.FormatFloat(*w.Rate, 'f', -1, 64)
			}
		}
	}
	var lead []string
	if kind == QEMU {
		lead = []string{first}
	}
	return PrintPropString(lead, kv, "name")
}

func setStr(kv map[string]string, k, v string) {
	if v != "" {
		kv[k] = v
	}
}

// setInt sets k to n, or removes it for 0 (no VLAN tag, the bridge's MTU).
func setInt(kv map[string]string, k string, n int) {
	if n == 0 {
		delete(kv, k)
		return
	}
	kv[k] = strconv.Itoa(n)
}
