package executor

import (
	"context"
	"fmt"
	"strings"

	"github.com/converge-pve/converge/internal/pve"
)

// The whole-guest operations of the scripted Proxmox.

var wholeTaskTypes = map[pve.Op]string{pve.OpResize: "resize", pve.OpMigrate: "qmigrate"}

func init() {
	for op, typ := range wholeTaskTypes {
		taskTypes[op] = typ
	}
}

// Resize records the disk's new size in the raw config.
func (p *fakePVE) Resize(ctx context.Context, ref pve.GuestRef, disk, size string) (pve.TaskRef, error) {
	return p.mutate(ctx, pve.OpResize, ref, func(g *fakeGuest) error {
		if g.cfg.Raw == nil {
			g.cfg.Raw = map[string]string{}
		}
		vol, _, _ := strings.Cut(g.cfg.Raw[disk], ",")
		g.cfg.Raw[disk] = vol + ",size=" + size
		g.digest += "+"
		return nil
	})
}

// Migrate moves the guest to the target node.
func (p *fakePVE) Migrate(ctx context.Context, ref pve.GuestRef, spec pve.MigrateSpec) (pve.TaskRef, error) {
	return p.mutate(ctx, pve.OpMigrate, ref, func(g *fakeGuest) error { g.node = spec.Target; return nil })
}

// HAMigrate moves the guest at once (the simulator's HA stack acts later;
// the executor waits on the guest either way).
func (p *fakePVE) HAMigrate(_ context.Context, sid, node string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, fmt.Sprintf("ha-migrate %s %s", sid, node))
	var vmid int
	fmt.Sscanf(sid[3:], "%d", &vmid)
	if g := p.guests[vmid]; g != nil {
		g.node = node
	}
	return nil
}

// HASetState records the request.
func (p *fakePVE) HASetState(_ context.Context, sid, state string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, fmt.Sprintf("ha-state %s %s", sid, state))
	return nil
}
