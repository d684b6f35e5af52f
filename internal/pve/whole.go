package pve

import (
	"slices"
	"strings"

	"github.com/converge-pve/converge/events"
)

// The whole guest at the edge: network interfaces, cloud-init keys and
// hotplug settings, read from the raw config into the normalised forms
// events carry (events.GuestConfig), so that Proxmox's round trips never
// read as drift.

// isNetKey reports whether key is an interface key, net0-net31.
func isNetKey(key string) bool { return events.IsIndexed(key, "net", 31) }

// wholeKey reports whether key is one of the whole-guest keys of kind
// that converge reads and writes beside the basic managed keys.
func wholeKey(kind Kind, key string) bool {
	switch {
	case isNetKey(key), IsDiskKey(kind, key):
		return true
	case kind == KindQEMU:
		return events.IsCloudInitKey(key) || key == "hotplug" || key == "numa"
	}
	return false
}

// normaliseWhole renders a whole-guest key's value as events carry it; a
// value that does not parse is kept trimmed (it reads as drift, and the
// desired value replaces it).
func normaliseWhole(kind Kind, key, v string) string {
	v = strings.TrimSpace(v)
	var out string
	var err error
	switch {
	case isNetKey(key):
		var n NIC
		if n, err = ParseNIC(kind, v); err == nil {
			out = n.Format(kind)
		}
	case key == "sshkeys":
		out, err = events.NormaliseSSHKeys(v)
	case events.IsIndexed(key, "ipconfig", 31):
		out, err = events.NormaliseIPConfig(v)
	case key == "nameserver":
		out, err = events.NormaliseNameserver(v)
	case key == "hotplug":
		return normaliseHotplug(v)
	default:
		return v
	}
	if err != nil {
		return v
	}
	return out
}

// normaliseHotplug is qemu-server's parse_hotplug_features as a sorted
// list, "" for the default (absent, "1", or network,disk,usb: most guests,
// and nothing to journal), "none" for "0".
func normaliseHotplug(v string) string {
	switch v {
	case "", "1":
		return ""
	case "0":
		return "none"
	}
	fs := strings.Split(v, ",")
	slices.Sort(fs)
	if out := strings.Join(slices.Compact(fs), ","); out != "disk,network,usb" {
		return out
	}
	return ""
}

// nets are the guest's interfaces, canonical.
func (g *GuestConfig) nets() map[string]string {
	var out map[string]string
	for k, v := range g.Raw {
		if isNetKey(k) {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = normaliseWhole(g.Ref.Kind, k, v)
		}
	}
	return out
}

// cloudInit are a VM's cloud-init keys, normalised.
func (g *GuestConfig) cloudInit() map[string]string {
	if g.Ref.Kind != KindQEMU {
		return nil
	}
	var out map[string]string
	for k, v := range g.Raw {
		if events.IsCloudInitKey(k) {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = normaliseWhole(KindQEMU, k, v)
		}
	}
	return out
}

// hotplug is a VM's hotplug features and NUMA flag ("", false for a
// container: it has neither).
func (g *GuestConfig) hotplug() (string, bool) {
	if g.Ref.Kind != KindQEMU {
		return "", false
	}
	return normaliseHotplug(strings.TrimSpace(g.Raw["hotplug"])), g.Raw["numa"] == "1"
}

// wholePending adds to out the whole-guest keys whose value changes once
// pending changes apply (a pending deletion reads as "").
func (g *GuestConfig) wholePending(out map[string]string) map[string]string {
	note := func(k, v string) {
		applied, ok := g.Raw[k]
		if ok && normaliseWhole(g.Ref.Kind, k, applied) == v || !ok && v == "" {
			return
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	for k, raw := range g.Pending {
		if wholeKey(g.Ref.Kind, k) {
			note(k, normaliseWhole(g.Ref.Kind, k, raw))
		}
	}
	for _, k := range g.PendingDelete {
		if wholeKey(g.Ref.Kind, k) {
			note(k, "")
		}
	}
	return out
}
