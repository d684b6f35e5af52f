package pve

import (
	"slices"
	"strconv"
	"strings"

	"github.com/converge-pve/converge/events"
)

// managedKeys are the config keys converge manages, as events name them
// (events.GuestConfig, events.Observed.Pending). LXC's "hostname" is
// "name" there, the key actions use for both kinds.
var managedKeys = []string{"name", "description", "tags", "cores", "memory", "onboot"}

// pveKey is the PVE config key of a managed key for kind.
func pveKey(kind Kind, key string) string {
	if kind == KindLXC && key == "name" {
		return "hostname"
	}
	return key
}

// Managed returns the managed part of the applied config as events carry
// it: description trimmed, tags normalised (sorted, never nil, a copy).
// Observer and executor report guests with it, so that both describe one
// Proxmox state identically.
func (g *GuestConfig) Managed() events.GuestConfig {
	hotplug, numa := g.hotplug()
	return events.GuestConfig{
		Name:        g.Name,
		Description: events.NormaliseDescription(g.Description),
		Tags:        events.NormaliseTags(g.Tags),
		Cores:       g.Cores,
		MemoryMiB:   g.MemoryMiB,
		OnBoot:      g.OnBoot,
		Disks:       g.disks(),
		Net:         g.nets(),
		CloudInit:   g.cloudInit(),
		Hotplug:     hotplug,
		NUMA:        numa,
	}
}

// disks are the guest's disks as events carry them; a value that does
// not parse has SizeBytes -1 (it is not converge's to judge).
func (g *GuestConfig) disks() map[string]events.Disk {
	var out map[string]events.Disk
	for k, v := range g.Raw {
		if !IsDiskKey(g.Ref.Kind, k) {
			continue
		}
		if out == nil {
			out = map[string]events.Disk{}
		}
		d, err := ParseDisk(k, v)
		if err != nil {
			// Kept, as not a disk converge can judge: a desired entry
			// for it is refused, never written over it.
			out[k] = events.Disk{Volume: strings.TrimSpace(v), SizeBytes: -1}
			continue
		}
		ed := events.Disk{Volume: d.Volume, SizeBytes: d.SizeBytes}
		if d.IsCDROM() {
			ed.Media = "cdrom"
		}
		out[k] = ed
	}
	return out
}

// ManagedPending returns the managed keys (name, description, tags, cores,
// memory, onboot; LXC's hostname as name) whose value
// will change once pending changes apply, typically at the next reboot.
// Values are normalised like applied ones (memory in MiB, booleans 0/1,
// tags ';'-joined); a pending deletion reads as the key's default; a value
// that does not parse is kept verbatim (trimmed). A pending write of the
// value in effect is no change. nil when nothing managed is pending.
func (g *GuestConfig) ManagedPending() map[string]string {
	applied := map[string]string{
		"name":        g.Name,
		"description": events.NormaliseDescription(g.Description),
		"tags":        events.FormatTags(g.Tags),
		"cores":       strconv.Itoa(g.Cores),
		"memory":      strconv.Itoa(g.MemoryMiB),
		"onboot":      events.FormatBool(g.OnBoot),
	}
	var out map[string]string
	for _, k := range managedKeys {
		pk := pveKey(g.Ref.Kind, k)
		var v string
		if raw, ok := g.Pending[pk]; ok {
			v = normalisePending(k, raw)
		} else if slices.Contains(g.PendingDelete, pk) {
			v = managedDefault(g.Ref.Kind, k)
		} else {
			continue
		}
		if v == applied[k] {
			continue // a pending write of the value in effect changes nothing
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	return g.wholePending(out)
}

// normalisePending renders a pending value of a managed key the way the
// applied one is normalised; a value that does not parse is kept verbatim
// (trimmed).
func normalisePending(key, raw string) string {
	switch key {
	case "description":
		return events.NormaliseDescription(raw)
	case "tags":
		return events.FormatTags(events.ParseTags(raw))
	case "cores":
		if n, err := ParseInt(raw); err == nil {
			return strconv.FormatInt(n, 10)
		}
	case "memory":
		if n, err := ParseMemoryMiB(raw); err == nil {
			return strconv.Itoa(n)
		}
	case "onboot":
		if b, err := ParseBool(raw); err == nil {
			return events.FormatBool(b)
		}
	}
	return strings.TrimSpace(raw)
}

// managedDefault is what a managed key reads as once its pending deletion
// applies.
func managedDefault(kind Kind, key string) string {
	switch key {
	case "cores":
		if kind == KindQEMU {
			return strconv.Itoa(DefaultQEMUCores)
		}
		return "0"
	case "memory":
		return strconv.Itoa(DefaultMemoryMiB)
	case "onboot":
		return "0"
	}
	return ""
}
