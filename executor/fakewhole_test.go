package executor

import (
	"context"
	"fmt"
	"strings"

	"github.com/converge-pve/converge/internal/pve"
)

// The whole-guest operations of the scripted Proxmox.

var wholeTaskTypes = map[pve.Op]string{pve.OpResize: "resize", pve.OpMigrate: "qmigrate", pve.OpSnapshot: "qmsnapshot",
	pve.OpDeleteSnapshot: "qmdelsnapshot"}

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
func (p *fakePVE) HAMigrate(_ context.Context, ref pve.GuestRef, node string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, fmt.Sprintf("ha-migrate %d %s", ref.VMID, node))
	if g := p.guests[ref.VMID]; g != nil {
		g.node = node
	}
	return nil
}

// HASetState records the request.
func (p *fakePVE) HASetState(_ context.Context, ref pve.GuestRef, state string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, fmt.Sprintf("ha-state %d %s", ref.VMID, state))
	return nil
}

// SetHARule records the request.
func (p *fakePVE) SetHARule(_ context.Context, ref pve.GuestRef, rule string, nodes []string, create bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, fmt.Sprintf("ha-rule %d %s %s create=%v", ref.VMID, rule, strings.Join(nodes, ","), create))
	return nil
}

// Snapshot records the snapshot as a task.
func (p *fakePVE) Snapshot(ctx context.Context, ref pve.GuestRef, name, _ string) (pve.TaskRef, error) {
	return p.mutate(ctx, pve.OpSnapshot, ref, func(g *fakeGuest) error {
		g.snaps = append(g.snaps, name)
		return nil
	})
}

// Snapshots lists the guest's snapshots, oldest first.
func (p *fakePVE) Snapshots(_ context.Context, ref pve.GuestRef) ([]pve.Snapshot, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	g, err := p.guest(ref)
	if err != nil {
		return nil, err
	}
	var out []pve.Snapshot
	for _, n := range g.snaps {
		out = append(out, pve.Snapshot{Name: n})
	}
	return out, nil
}

// DeleteSnapshot removes one.
func (p *fakePVE) DeleteSnapshot(ctx context.Context, ref pve.GuestRef, name string) (pve.TaskRef, error) {
	return p.mutate(ctx, pve.OpDeleteSnapshot, ref, func(g *fakeGuest) error {
		for i, n := range g.snaps {
			if n == name {
				g.snaps = append(g.snaps[:i:i], g.snaps[i+1:]...)
			}
		}
		return nil
	})
}

// RegenerateCloudInit records the call.
func (p *fakePVE) RegenerateCloudInit(_ context.Context, ref pve.GuestRef) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, fmt.Sprintf("cloudinit %d", ref.VMID))
	return nil
}

// SetPool records the call.
func (p *fakePVE) SetPool(_ context.Context, pool string, vmid int, remove bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, fmt.Sprintf("pool %s %d remove=%v", pool, vmid, remove))
	if e := p.fail[pve.OpSetPool]; e != nil {
		delete(p.fail, pve.OpSetPool)
		return e
	}
	return nil
}

// CreatePool records the call.
func (p *fakePVE) CreatePool(_ context.Context, pool, _ string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, "create-pool "+pool)
	return nil
}
