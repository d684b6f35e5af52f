package importer

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/converge-pve/converge/events"
)

// nics are NetWant equivalents of the guest's interfaces: each is checked
// by the planner's own edit (events.EditNIC over the value it starts from
// gives that value back); one that does not is left out.
func (g *Guest) nets(o *events.Observed) {
	for _, k := range slices.Sorted(maps.Keys(o.Config.Net)) {
		base := o.Config.Net[k]
		q, pend := o.Pending[k]
		if pend && q == "" {
			g.note("net.%s: left out: its removal is pending in Proxmox (at the next restart); a desired interface would revert that", k)
			continue
		}
		if pend {
			base = q
			g.note("net.%s: pending in Proxmox: %q (applies at the next restart): imported as the desired value", k, q)
		}
		w := netWant(o.Kind, base)
		if events.EditNIC(o.Kind, k, base, w) != base {
			w = events.NetWant{}
			if events.EditNIC(o.Kind, k, base, w) != base {
				g.note("net.%s: left out: Proxmox's value %q has no desired equivalent", k, base)
				continue
			}
			g.note("net.%s: written without settings (Proxmox's value %q has none a desired state can hold exactly): the interface is kept as it is", k, base)
		}
		if g.Desired.Net == nil {
			g.Desired.Net = map[string]events.NetWant{}
		}
		g.Desired.Net[k] = w
	}
	for _, k := range slices.Sorted(maps.Keys(o.Pending)) {
		if _, ok := o.Config.Net[k]; !ok && events.IsIndexed(k, "net", 31) && o.Pending[k] != "" {
			w := netWant(o.Kind, o.Pending[k])
			if events.EditNIC(o.Kind, k, o.Pending[k], w) == o.Pending[k] {
				if g.Desired.Net == nil {
					g.Desired.Net = map[string]events.NetWant{}
				}
				g.Desired.Net[k] = w
			} else {
				g.note("net.%s: left out: added in Proxmox, pending until the next restart (%q)", k, o.Pending[k])
			}
		}
	}
}

var models = []string{"virtio", "e1000", "e1000e", "rtl8139", "vmxnet3"}

// netWant reads a canonical netN value into the desired settings it holds.
func netWant(kind events.GuestKind, v string) events.NetWant {
	var w events.NetWant
	for i, part := range strings.Split(v, ",") {
		k, val, _ := strings.Cut(part, "=")
		if kind == events.QEMU && i == 0 {
			if slices.Contains(models, k) {
				w.Model = k
			}
			continue
		}
		switch k {
		case "bridge":
			w.Bridge = val
		case "tag":
			if n, err := strconv.Atoi(val); err == nil {
				w.Tag = &n
			}
		case "mtu":
			if n, err := strconv.Atoi(val); err == nil {
				w.MTU = &n
			}
		case "firewall":
			f := val == "1"
			w.Firewall = &f
		case "rate":
			if r, err := strconv.ParseFloat(val, 64); err == nil {
				w.Rate = &r
			}
		}
		if kind == events.LXC {
			switch k {
			case "name":
				w.Name = val
			case "ip":
				w.IP = val
			case "gw":
				w.GW = val
			}
		}
	}
	if w.Firewall == nil {
		f := false
		w.Firewall = &f
	}
	return w
}

// cloudInit are the VM's cloud-init keys, pending values first.
func (g *Guest) cloudInit(o *events.Observed) {
	val := map[string]string{}
	maps.Copy(val, o.Config.CloudInit)
	for k, q := range o.Pending {
		if events.IsCloudInitKey(k) {
			if q == "" {
				g.note("cloudinit %s: left out: its removal is pending in Proxmox; a desired value would revert that", k)
				delete(val, k)
				continue
			}
			val[k] = q
			g.note("cloudinit %s: pending in Proxmox: %q (applies at the next restart): imported as the desired value", k, q)
		}
	}
	if len(val) == 0 {
		return
	}
	ci := &events.CloudInit{}
	str := func(s string) *string { return &s }
	for _, k := range slices.Sorted(maps.Keys(val)) {
		v := val[k]
		switch {
		case k == "ciuser":
			ci.User = str(v)
		case k == "sshkeys":
			keys, err := events.DecodeSSHKeys(v)
			if err != nil {
				g.note("cloudinit.ssh_keys: left out: %v", err)
				continue
			}
			ci.SSHKeys = &keys
		case strings.HasPrefix(k, "ipconfig"):
			if ci.IPConfig == nil {
				ci.IPConfig = map[string]string{}
			}
			ci.IPConfig[k] = v
		case k == "nameserver":
			ci.Nameserver = str(v)
		case k == "searchdomain":
			ci.SearchDomain = str(v)
		case k == "cicustom":
			ci.Custom = str(v)
		}
	}
	g.Desired.CloudInit = ci
}
