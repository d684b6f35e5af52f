package importer

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/converge-pve/converge/events"
)

// Guest is one imported desired state and what import says about it.
type Guest struct {
	Desired events.Desired
	// Notes explain fields left out and what Proxmox showed (a lock, a
	// pending change); each becomes a comment above the guest.
	Notes []string
	// Kept: the guest already had a desired state, kept as it is.
	Kept bool
}

func (g *Guest) note(format string, a ...any) { g.Notes = append(g.Notes, fmt.Sprintf(format, a...)) }

// FromObserved is the desired state equal to observation o in every field
// the desired contract has, with notes for the fields left out. Pending
// values of managed keys are the desired values (with restart: never):
// what the guest gets at its next restart is what it is meant to have.
func FromObserved(o *events.Observed) Guest {
	g := Guest{Desired: events.Desired{VMID: o.VMID}}
	d := &g.Desired
	kind := o.Kind
	d.Kind = &kind
	pending := false
	// value is the key's effective value: pending if a change waits.
	value := func(key, applied string) (string, bool) {
		if q, ok := o.Pending[key]; ok {
			pending = true
			return q, true
		}
		return applied, false
	}
	if o.Lock != "" {
		g.note("locked (%s) in Proxmox: imported as Proxmox shows it; converge acts on it only once the lock is gone", o.Lock)
	}
	if o.Template {
		g.note("a template: converge does not manage templates (its status shows an error); imported because --templates was given")
	}
	g.power(o)
	if name, _ := value("name", o.Config.Name); name != "" {
		d.Name = &name
	} else {
		g.note("name: none set in Proxmox, left out")
	}
	desc, _ := value("description", o.Config.Description)
	d.Description = &desc
	tagStr, _ := value("tags", events.FormatTags(o.Config.Tags))
	tags := slices.DeleteFunc(events.ParseTags(tagStr), func(t string) bool { return strings.EqualFold(t, events.OwnerTag) })
	if tags == nil {
		tags = []string{}
	}
	d.Tags = &tags
	if s, _ := value("cores", strconv.Itoa(o.Config.Cores)); s != "0" {
		if n, err := strconv.Atoi(s); err == nil {
			d.Cores = &n
		}
	} else {
		g.note("cores: not limited in Proxmox (a container sees every host CPU), which a desired state cannot say: left out")
	}
	if n, err := strconv.Atoi(first(value("memory", strconv.Itoa(o.Config.MemoryMiB)))); err == nil {
		d.MemoryMiB = &n
	}
	ob := first(value("onboot", events.FormatBool(o.Config.OnBoot))) == "1"
	d.OnBoot = &ob
	switch own := ownNode(o); {
	case o.HA == "":
		node := o.Node
		d.Node = &node
	case own != "":
		// Left out, converge would delete its own rule (ha.go).
		d.Node = &own
		g.note("node: %s, as converge's HA node-affinity rule %s places the guest (it runs on %s)", own, o.HAPlacement.Rule, o.Node)
	default:
		g.note("node: left out (the guest runs on %s): HA places it, and a desired node would make converge write an HA node-affinity rule", o.Node)
	}
	pool := o.Pool
	d.Pool = &pool
	g.disks(o)
	g.nets(o)
	if o.Kind == events.QEMU {
		g.cloudInit(o)
	}
	for _, k := range slices.Sorted(maps.Keys(o.Pending)) {
		if events.IsDiskKey(k, o.Kind) || events.IsIndexed(k, "net", 31) || events.IsCloudInitKey(k) {
			continue // said by disks, nets and cloudInit
		}
		g.note("pending in Proxmox: %s=%q (applies at the next restart): imported as the desired value", k, o.Pending[k])
	}
	if pending || len(o.Pending) > 0 {
		never := events.RestartNever
		d.Restart = &never
		g.note("restart: never, so that converge does not restart the guest to apply the pending changes; they apply at its next restart")
	}
	return g
}

func first(s string, _ bool) string { return s }

// power is the desired power the planner reads as what the guest has:
// the HA state of an HA-managed guest, its status otherwise.
func (g *Guest) power(o *events.Observed) {
	var p events.Power
	switch {
	case o.HA == "started":
		p = events.PowerRunning
	case o.HA == "stopped" || o.HA == "disabled":
		p = events.PowerStopped
	case o.HA == "ignored":
		g.note("power: left out: HA state ignored (an operator took the guest out of HA's hands); converge would not start or stop it anyway")
		return
	case o.HA != "":
		g.note("power: left out: HA state %q is neither started nor stopped", o.HA)
		return
	case o.Status == "running" || o.Status == "stopped":
		p = events.Power(o.Status)
	default:
		g.note("power: left out: the guest is %q (converge neither resumes nor stops a paused guest, and waits on an unknown one)", o.Status)
		return
	}
	if o.HA != "" {
		g.note("power %s from HA state %s (HA starts and stops the guest; the guest is %s now)", p, o.HA, o.Status)
	}
	g.Desired.Power = &p
}

// disks are the guest's disks of whole GiB; the others are left out.
func (g *Guest) disks(o *events.Observed) {
	for _, k := range slices.Sorted(maps.Keys(o.Config.Disks)) {
		dk := o.Config.Disks[k]
		q, pend := o.Pending[k]
		switch {
		case dk.Media == "cdrom":
			continue // not a disk converge sizes
		case dk.SizeBytes < 0:
			g.note("disks.%s: left out: Proxmox's value %q does not read as a disk", k, dk.Volume)
		case pend && q == "":
			g.note("disks.%s: left out: its removal is pending in Proxmox (at the next restart); a desired size would revert that", k)
		case dk.SizeBytes == 0:
			g.note("disks.%s: left out: %q has no size (a bind mount or a device): not a disk converge sizes", k, dk.Volume)
		case dk.SizeBytes%events.GiB != 0:
			g.note("disks.%s: left out: its size, %.2f GiB (%d bytes), is not a whole number of GiB; desired sizes are whole GiB, and converge would grow it to the next one", k, float64(dk.SizeBytes)/float64(events.GiB), dk.SizeBytes)
		default:
			if g.Desired.Disks == nil {
				g.Desired.Disks = map[string]events.DiskWant{}
			}
			g.Desired.Disks[k] = events.DiskWant{SizeGiB: int(dk.SizeBytes / events.GiB)}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(o.Pending)) {
		if _, ok := o.Config.Disks[k]; !ok && events.IsDiskKey(k, o.Kind) && o.Pending[k] != "" {
			g.note("disks.%s: left out: added in Proxmox, pending until the next restart (%q)", k, o.Pending[k])
		}
	}
}
