package observer

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/pve"
)

// rowKey is the part of an inventory row whose change makes the observer
// re-read the guest's config.
type rowKey struct {
	Status, Lock, Tags, Name, Node, HA, Pool string
	Kind                                     pve.Kind
	Template                                 bool
	MaxCPU                                   int
	MaxMemMiB                                int64
}

func rowKeyOf(r *pve.Resource) rowKey {
	return rowKey{
		Status: r.Status, Lock: r.Lock, Tags: strings.Join(r.Tags, ";"), Name: r.Name, Node: r.Node, HA: r.HAState, Pool: r.Pool,
		Kind: r.Kind, Template: r.Template, MaxCPU: r.MaxCPU, MaxMemMiB: r.MaxMemMiB,
	}
}

// matches reports whether r is the row k was taken from: rowKeyOf(r) == k,
// without joining r's tags (every guest, every pass).
func (k *rowKey) matches(r *pve.Resource) bool {
	return k.Status == r.Status && k.Lock == r.Lock && k.Name == r.Name && k.Node == r.Node && k.HA == r.HAState &&
		k.Pool == r.Pool && k.Kind == r.Kind && k.Template == r.Template && k.MaxCPU == r.MaxCPU &&
		k.MaxMemMiB == r.MaxMemMiB && joinedEqual(k.Tags, r.Tags)
}

// joinedEqual reports whether joined == strings.Join(tags, ";").
func joinedEqual(joined string, tags []string) bool {
	for i, t := range tags {
		if i > 0 {
			if joined == "" || joined[0] != ';' {
				return false
			}
			joined = joined[1:]
		}
		if !strings.HasPrefix(joined, t) {
			return false
		}
		joined = joined[len(t):]
	}
	return joined == ""
}

// configSnap is what the observer keeps of a config read.
type configSnap struct {
	Digest    string
	Config    events.GuestConfig
	Pending   map[string]string // nil when nothing managed is pending
	Protected bool
	// Agent: the config enables the QEMU guest agent (agent.go); not a
	// managed value, never part of an observation.
	Agent bool
}

// snapOf extracts the managed, normalised part of a config read, as the
// executor's read-backs do (pve.GuestConfig.Managed, ManagedPending).
func snapOf(g *pve.GuestConfig) configSnap {
	return configSnap{Digest: g.Digest, Config: g.Managed(), Pending: g.ManagedPending(), Protected: g.Protected, Agent: g.AgentEnabled()}
}

func eventKind(k pve.Kind) events.GuestKind {
	if k == pve.KindLXC {
		return events.LXC
	}
	return events.QEMU
}

// snapshot builds the observation of a listed guest from its inventory row
// and its last config read.
func (o *Observer) snapshot(r *pve.Resource, g *guestState, now time.Time) events.Observed {
	return events.Observed{
		Meta:     events.NewMeta(o.cfg.Name, "", now),
		VMID:     r.VMID,
		Cluster:  o.cfg.Cluster,
		Exists:   true,
		Node:     r.Node,
		Kind:     eventKind(r.Kind),
		Status:   g.statusFor(r),
		Lock:     r.Lock,
		Template: r.Template,
		Digest:   g.cfg.Digest,
		Config:   g.cfg.Config,
		Pending:  g.cfg.Pending,
		// What Proxmox would refuse to destroy, and what HA keeps the
		// guest in (from the inventory, read live).
		Protected:   g.cfg.Protected,
		HA:          r.HAState,
		HAPlacement: g.placement,
		Pool:        r.Pool,
		ReadAt:      g.readAt,
		AfterSeq:    g.afterSeq,
		Source:      events.SourceObserver,
	}
}

// statusFor is the status a snapshot of the guest carries: the one
// decided (status.go) while the inventory still shows what it showed then,
// else the inventory's.
func (g *guestState) statusFor(r *pve.Resource) string {
	if g.decided && g.statusRow == r.Status {
		return g.status
	}
	return r.Status
}

// goneSnapshot is the observation of a guest Proxmox no longer lists.
func (o *Observer) goneSnapshot(vmid int, readAt, now time.Time, afterSeq uint64) *events.Observed {
	return &events.Observed{
		Meta:     events.NewMeta(o.cfg.Name, "", now),
		VMID:     vmid,
		Cluster:  o.cfg.Cluster,
		Config:   events.GuestConfig{Tags: []string{}},
		ReadAt:   readAt,
		AfterSeq: afterSeq,
		Source:   events.SourceObserver,
	}
}

// sameObservation compares two observations, ignoring Meta and ReadAt
// (and nil versus empty tags and pending maps).
func sameObservation(a, b *events.Observed) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.VMID != b.VMID || a.Cluster != b.Cluster || a.Exists != b.Exists || a.Source != b.Source {
		return false
	}
	if !a.Exists {
		return true // nothing else is meaningful for a guest that is gone
	}
	ca, cb := a.Config, b.Config
	return a.Node == b.Node && a.Kind == b.Kind && a.Status == b.Status && a.Lock == b.Lock &&
		a.Template == b.Template && a.Digest == b.Digest && a.Protected == b.Protected && a.HA == b.HA && a.Pool == b.Pool && a.HAPlacement.Equal(b.HAPlacement) &&
		ca.Name == cb.Name && ca.Description == cb.Description && ca.Cores == cb.Cores &&
		ca.MemoryMiB == cb.MemoryMiB && ca.OnBoot == cb.OnBoot && slices.Equal(ca.Tags, cb.Tags) &&
		maps.Equal(a.Pending, b.Pending)
}
