package observer

import (
	"strings"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/pve"
)

// What the observer keeps from one pass to the next (each guest's row
// key and config snapshot, its published observations) holds no string of
// Proxmox's answers: a decoder may hand out strings that are views into
// its copy of the whole answer (goccy/go-json's were, when package pve
// used it), and then one kept string kept the whole inventory (megabytes at 100,000
// guests) of the pass that read it, and a config answer per guest. Values
// that recur (nodes, states, tags, keys) are interned, the rest copied
// (TestObserverKeepsNoAnswer), whichever decoder package pve uses.

// maxInterned bounds the interned strings: beyond, values are copied.
const maxInterned = 4096

// intern returns s as the observer's own string, shared by equal values.
func (o *Observer) intern(s string) string {
	if s == "" {
		return ""
	}
	if v, ok := o.strs[s]; ok {
		return v
	}
	v := strings.Clone(s)
	if o.strs == nil {
		o.strs = map[string]string{}
	}
	if len(o.strs) < maxInterned {
		o.strs[v] = v
	}
	return v
}

// ownRow is rowKeyOf on the observer's own strings.
func (o *Observer) ownRow(r *pve.Resource) rowKey {
	k := rowKeyOf(r)
	k.Status, k.Lock, k.Node, k.HA, k.Pool = o.intern(k.Status), o.intern(k.Lock), o.intern(k.Node), o.intern(k.HA), o.intern(k.Pool)
	k.Tags, k.Name = o.intern(k.Tags), strings.Clone(k.Name)
	return k
}

// ownSnap is snapOf on the observer's own strings.
func (o *Observer) ownSnap(g *pve.GuestConfig) configSnap {
	s := snapOf(g)
	s.Digest = strings.Clone(s.Digest)
	c := &s.Config
	c.Name, c.Description, c.Hotplug = strings.Clone(c.Name), strings.Clone(c.Description), o.intern(c.Hotplug)
	if c.Tags != nil {
		tags := make([]string, len(c.Tags))
		for i, t := range c.Tags {
			tags[i] = o.intern(t)
		}
		c.Tags = tags
	}
	if c.Disks != nil {
		disks := make(map[string]events.Disk, len(c.Disks))
		for k, d := range c.Disks {
			d.Volume, d.Media = strings.Clone(d.Volume), o.intern(d.Media)
			disks[o.intern(k)] = d
		}
		c.Disks = disks
	}
	c.Net, c.CloudInit, s.Pending = o.ownMap(c.Net), o.ownMap(c.CloudInit), o.ownMap(s.Pending)
	return s
}

func (o *Observer) ownMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[o.intern(k)] = strings.Clone(v)
	}
	return out
}

// ownObservation makes a published observation's row values the
// observer's own (its config is already: ownSnap).
func (o *Observer) ownObservation(ob *events.Observed) {
	ob.Node, ob.Status, ob.Lock, ob.HA, ob.Pool = o.intern(ob.Node), o.intern(ob.Status), o.intern(ob.Lock), o.intern(ob.HA), o.intern(ob.Pool)
}
