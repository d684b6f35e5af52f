package importer

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/planner"
	"github.com/converge-pve/converge/projector"
)

// check makes the desired state valid and quiet: a field the desired
// contract refuses, or that the planner would act on (restart allowed, so
// that a restart it would need counts too), is left out with the reason.
func (g *Guest) check(o *events.Observed, now time.Time) {
	for range 4 {
		if err := g.Desired.Validate(o.VMID); err != nil {
			var ve *events.ValidationError
			if !errors.As(err, &ve) {
				g.note("not importable: %v", err)
				return
			}
			dropped := false
			for _, p := range ve.Problems {
				if f := topField(p.Field); f != "" && g.drop(f, p.Field) {
					g.note("%s: left out: %s", p.Field, p.Message)
					dropped = true
				}
			}
			if !dropped {
				g.note("not importable: %v", err)
				return
			}
			continue
		}
		steps := plan(&g.Desired, o, now)
		if len(steps) == 0 {
			return
		}
		dropped := false
		for _, s := range steps {
			for _, f := range fieldsOf(s) {
				if g.drop(topField(f), f) {
					g.note("%s: left out: the planner would act on it (%s)", f, s.Reason)
					dropped = true
				}
			}
		}
		if !dropped {
			g.note("warning: the planner would act on this guest: %s", steps[0].Reason)
			return
		}
	}
}

// plan is what the planner would do with d over o, a fresh observation.
func plan(d *events.Desired, o *events.Observed, now time.Time) []planner.Step {
	p := planner.DefaultPolicy()
	p.Restart = events.RestartAllowed
	p.RestartWindow = ""
	v := &projector.View{VMID: o.VMID, Desired: d, Observed: o, DesiredSeq: 1}
	c := projector.ClusterState{HeartbeatAt: now, Reachable: true}
	dec := planner.Plan(v, c, p, now)
	return dec.Steps
}

// fieldsOf are the desired fields (dotted) a step acts on.
func fieldsOf(s planner.Step) []string {
	switch s.Op {
	case events.OpSetConfig:
		var out []string
		for _, k := range append(append(slices.Collect(maps.Keys(s.Set)), s.Delete...), s.Revert...) {
			out = append(out, fieldOfKey(k))
		}
		return out
	case events.OpResize:
		if s.Resize != nil {
			return []string{"disks." + s.Resize.Disk}
		}
	case events.OpMigrate, events.OpSetHARule:
		return []string{"node"}
	case events.OpSetPool:
		return []string{"pool"}
	case events.OpStart, events.OpShutdown, events.OpSetHAState:
		return []string{"power"}
	case events.OpReboot:
		return []string{"restart"}
	}
	return []string{"power"}
}

// fieldOfKey is the desired field of a Proxmox config key.
func fieldOfKey(k string) string {
	switch {
	case k == "memory":
		return "memory_mib"
	case k == "hostname":
		return "name"
	case events.IsIndexed(k, "net", 31):
		return "net." + k
	case events.IsCloudInitKey(k):
		return "cloudinit"
	case events.IsDiskKey(k, ""):
		return "disks." + k
	}
	return k
}

func topField(f string) string {
	top, _, _ := strings.Cut(f, ".")
	return top
}

// drop leaves field out (a disk or interface alone when named, else the
// whole top-level field); false if it was not there.
func (g *Guest) drop(top, field string) bool {
	d := &g.Desired
	_, sub, _ := strings.Cut(field, ".")
	sub, _, _ = strings.Cut(sub, ".")
	had := true
	switch top {
	case "disks":
		if _, ok := d.Disks[sub]; sub != "" && ok {
			delete(d.Disks, sub)
		} else {
			had, d.Disks = d.Disks != nil, nil
		}
		if len(d.Disks) == 0 {
			d.Disks = nil
		}
	case "net":
		if _, ok := d.Net[sub]; sub != "" && ok {
			delete(d.Net, sub)
		} else {
			had, d.Net = d.Net != nil, nil
		}
		if len(d.Net) == 0 {
			d.Net = nil
		}
	case "power":
		had, d.Power = d.Power != nil, nil
	case "name":
		had, d.Name = d.Name != nil, nil
	case "description":
		had, d.Description = d.Description != nil, nil
	case "tags":
		had, d.Tags = d.Tags != nil, nil
	case "cores":
		had, d.Cores = d.Cores != nil, nil
	case "memory_mib":
		had, d.MemoryMiB = d.MemoryMiB != nil, nil
	case "onboot":
		had, d.OnBoot = d.OnBoot != nil, nil
	case "node":
		had, d.Node = d.Node != nil, nil
	case "pool":
		had, d.Pool = d.Pool != nil, nil
	case "cloudinit":
		had, d.CloudInit = d.CloudInit != nil, nil
	case "restart":
		// A reboot: the pending values it would apply are what the
		// restart: never below stops; set it (it is never dropped).
		never := events.RestartNever
		had, d.Restart = d.Restart == nil, &never
	default:
		return false
	}
	return had
}
