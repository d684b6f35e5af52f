package projector

import (
	"slices"
	"strings"

	"github.com/converge-pve/converge/events"
)

// What the fold keeps of each guest, held once: interned values, strings
// shared between a guest's events, views copied before they change while a
// snapshot may share them.

// view returns vmid's view, made if missing, ready to change.
func (p *Projector) view(vmid int) *View {
	v := p.Views[vmid]
	if v == nil {
		v = &View{VMID: vmid, Cluster: p.Cluster, gen: p.gen}
		p.Views[vmid] = v
	}
	return p.mutable(vmid, v)
}

// mutable returns v, or its copy if a snapshot may share it (Snapshot).
func (p *Projector) mutable(vmid int, v *View) *View {
	if v.gen != p.gen {
		v = v.Clone()
		v.gen = p.gen
		p.Views[vmid] = v
	}
	return v
}

func (p *Projector) intern(s *string) {
	if *s == "" {
		return
	}
	if p.strs == nil {
		p.strs = map[string]string{}
	}
	if v, ok := p.strs[*s]; ok {
		*s = v
		return
	}
	if len(p.strs) < 4096 {
		*s = strings.Clone(*s) // the table's own: *s may be a view into a message
		p.strs[*s] = *s
	}
}

func (p *Projector) internObserved(o *events.Observed) {
	for _, s := range []*string{&o.Publisher, &o.Cluster, &o.Node, (*string)(&o.Kind), &o.Status, &o.Lock, &o.Source} {
		p.intern(s)
	}
	for i := range o.Config.Tags {
		p.intern(&o.Config.Tags[i])
	}
}

// share points a guest's strings that repeat the ones its view already
// holds at those: a converged guest's observed name and description are
// its desired ones, and an action's correlation id and a result's action
// and correlation ids repeat their predecessors'. One copy per guest
// instead of up to three (BenchmarkPlannerMemory, in package planner).
func share(s *string, with string) {
	if *s == with {
		*s = with
	}
}

func shareDesired(o *events.Observed, d *events.Desired) {
	if o == nil || d == nil {
		return
	}
	if d.Name != nil {
		share(&o.Config.Name, *d.Name)
	}
	if d.Description != nil {
		share(&o.Config.Description, *d.Description)
	}
	if d.Tags != nil && len(*d.Tags) > 0 && slices.Equal(*d.Tags, o.Config.Tags) {
		o.Config.Tags = *d.Tags // read-only both: one array
	}
}

// enumPtr returns the projector's one pointer to value: desired events
// point at a few enumerated values (power, kind, restart), and views never
// change what they point to.
func enumPtr[T ~string](p *Projector, v *T) *T {
	if v == nil {
		return nil
	}
	if p.enums == nil {
		p.enums = map[string]any{}
	}
	if q, ok := p.enums[string(*v)].(*T); ok {
		return q
	}
	if len(p.enums) < 64 {
		p.enums[string(*v)] = v
	}
	return v
}

// maxShared bounds each table of shared desired values: a fleet's
// recurring sizes, descriptions and tag sets fit; unique values beyond it
// are kept once, by their guest.
const maxShared = 4096

// shareValues points a desired event's enumerated values (power, kind,
// restart) and recurring ones (cores, memory, description, pool, tag set)
// at one copy the projector keeps: at 100,000 guests each is otherwise an
// allocation of its own (BenchmarkPlannerMemory, in package planner).
// Views never change what desired pointers point to.
func (p *Projector) shareValues(d *events.Desired) {
	d.Power, d.Kind, d.Restart = enumPtr(p, d.Power), enumPtr(p, d.Kind), enumPtr(p, d.Restart)
	if p.ints == nil {
		p.ints, p.texts, p.tagSet = map[int]*int{}, map[string]*string{}, map[string]*[]string{}
	}
	d.Cores, d.MemoryMiB = sharedVal(p.ints, d.Cores), sharedVal(p.ints, d.MemoryMiB)
	d.Description, d.Pool = sharedVal(p.texts, d.Description), sharedVal(p.texts, d.Pool)
	if d.Tags != nil {
		// Keyed by the tags joined with NUL, which no tag holds; the
		// lookup with string(bytes) does not allocate.
		p.tagKey = p.tagKey[:0]
		for _, t := range *d.Tags {
			p.tagKey = append(append(p.tagKey, t...), 0)
		}
		if q, ok := p.tagSet[string(p.tagKey)]; ok {
			d.Tags = q
		} else if len(p.tagSet) < maxShared {
			p.tagSet[string(p.tagKey)] = d.Tags
		}
	}
}

// sharedVal returns the table's pointer to *v's value, keeping v as that
// pointer while the table has room.
func sharedVal[T comparable](table map[T]*T, v *T) *T {
	if v == nil {
		return v
	}
	if q, ok := table[*v]; ok {
		return q
	}
	if len(table) < maxShared {
		table[*v] = v
	}
	return v
}
