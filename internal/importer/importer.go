package importer

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/pve"
)

// Proxmox is what import reads; *pve.Client satisfies it.
type Proxmox interface {
	Inventory(ctx context.Context) ([]pve.Resource, error)
	GuestConfig(ctx context.Context, ref pve.GuestRef) (*pve.GuestConfig, error)
}

var _ Proxmox = (*pve.Client)(nil)

// Selection says which guests to import: the VMIDs named, or every guest
// (All), or those on Node, in Pool or with Tag (together: all of them).
// Templates are left out unless Templates.
type Selection struct {
	VMIDs           []int
	All             bool
	Node, Pool, Tag string
	Templates       bool
}

// Empty reports whether nothing was asked for.
func (s Selection) Empty() bool {
	return len(s.VMIDs) == 0 && !s.All && s.Node == "" && s.Pool == "" && s.Tag == ""
}

func (s Selection) matches(r *pve.Resource) bool {
	if len(s.VMIDs) > 0 && !slices.Contains(s.VMIDs, r.VMID) {
		return false
	}
	if s.Node != "" && r.Node != s.Node || s.Pool != "" && r.Pool != s.Pool {
		return false
	}
	return s.Tag == "" || slices.ContainsFunc(r.Tags, func(t string) bool { return strings.EqualFold(t, s.Tag) })
}

// Result is an import: the guests in VMID order, and the selected ones
// left out (templates, VMIDs Proxmox does not list) with the reason.
type Result struct {
	Guests  []Guest
	Skipped []string
}

// Read imports the selected guests: one inventory, then each guest's
// config and pending values (one call each, one at a time).
func Read(ctx context.Context, px Proxmox, sel Selection, now time.Time) (*Result, error) {
	inv, err := px.Inventory(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the inventory: %w", err)
	}
	ha, err := placements(ctx, px, inv)
	if err != nil {
		return nil, err
	}
	res := &Result{}
	listed := map[int]bool{}
	for i := range inv {
		r := &inv[i]
		listed[r.VMID] = true
		if !sel.matches(r) {
			continue
		}
		if r.Template && !sel.Templates {
			res.Skipped = append(res.Skipped, fmt.Sprintf("%d: a template (--templates imports templates)", r.VMID))
			continue
		}
		cfg, err := px.GuestConfig(ctx, r.Ref())
		if err != nil {
			return nil, fmt.Errorf("read guest %d's config: %w", r.VMID, err)
		}
		o := Observe(r, cfg, now)
		if r.HAState != "" {
			o.HAPlacement = ha[r.VMID]
		}
		res.Guests = append(res.Guests, Import(o, now))
	}
	for _, id := range sel.VMIDs {
		if !listed[id] {
			res.Skipped = append(res.Skipped, fmt.Sprintf("%d: Proxmox lists no such guest", id))
		}
	}
	slices.SortFunc(res.Guests, func(a, b Guest) int { return a.Desired.VMID - b.Desired.VMID })
	return res, nil
}

// Observe is the observation the observer makes of a listed guest from
// its inventory row and config read (internal/observer snapshot): the
// values the planner compares desired states with.
func Observe(r *pve.Resource, g *pve.GuestConfig, now time.Time) *events.Observed {
	kind := events.QEMU
	if r.Kind == pve.KindLXC {
		kind = events.LXC
	}
	return &events.Observed{
		VMID: r.VMID, Exists: true, Node: r.Node, Kind: kind, Status: r.Status, Lock: r.Lock,
		Template: r.Template || g.Template, Digest: g.Digest, Config: g.Managed(), Pending: g.ManagedPending(),
		Protected: g.Protected, HA: r.HAState, Pool: r.Pool, ReadAt: now, Source: "import",
	}
}

// Import is FromObserved checked: the desired state is valid, and the
// planner plans nothing from it.
func Import(o *events.Observed, now time.Time) Guest {
	g := FromObserved(o)
	g.check(o, now)
	return g
}

// KeepManaged replaces each guest that already has a desired state
// (current returns it, with its journal sequence; nil for none) other
// than the imported one by that state, as it is.
func KeepManaged(res *Result, current func(vmid int) (*events.Desired, uint64, error)) error {
	for i := range res.Guests {
		g := &res.Guests[i]
		d, seq, err := current(g.Desired.VMID)
		if err != nil {
			return err
		}
		if d == nil || sameDesired(d, &g.Desired) {
			// Managed as Proxmox has it: the import says so as it is,
			// so importing what was published gives the same file.
			continue
		}
		*g = Guest{Desired: *d, Kept: true}
		g.note("already managed: its current desired state (journal #%d) is kept as it is; --observed imports what Proxmox shows instead", seq)
		if d.Absent {
			g.note("its current desired state is absent: publishing it keeps the guest's destruction asked for (behind the destroy gate); drop the entry, or import with --observed, to keep the guest")
		}
	}
	return nil
}

// sameDesired compares two desired states as the journal carries them.
func sameDesired(a, b *events.Desired) bool {
	ea, err1 := events.Encode(a)
	eb, err2 := events.Encode(b)
	return err1 == nil && err2 == nil && string(ea) == string(eb)
}
