package pvesim

import (
	"fmt"
	"slices"
	"strings"
)

// ---- a config write's storage locks -------------------------------------------
//
// A config write frees the unusedN volumes it deletes and allocates the
// new volumes it sets, each under the storage's lock (storagelock.go):
// qemu-server's update_vm_api (src/PVE/API2/Qemu.pm) deletes first, in the
// request's order (an unusedN through try_deallocate_drive → vdisk_free),
// then sets each option (a new disk through create_disks → vdisk_alloc,
// and vdisk_create_base for a template's), writing the config after each,
// and dies at the first failure; pve-container's update_pct_config
// (src/PVE/LXC/Config.pm vmconfig_apply_pending, or
// vmconfig_hotplug_pending for a running container) deletes, then sets,
// each in sorted key order, collects each failure and writes nothing if
// one failed (src/PVE/API2/LXC/Config.pm: raise_param_exc before
// write_config).

// configLocks is the outcome of a config write's storage locks.
type configLocks struct {
	run *lockRun
	// QEMU: the first timeout, the deletions (ch.del[:dels]) and the
	// allocations (drive keys) done before it.
	err    error
	dels   int
	allocs []string
	// LXC: each timeout's message, by key, and the unused volumes freed.
	errs  map[string]string
	freed []string
}

// configLocks takes the storage locks of a config write's frees and
// allocations. Caller holds s.mu.
func (s *Sim) configLocks(g *guest, ch *configChange) *configLocks {
	c := &configLocks{run: s.lockRun(g.node), dels: len(ch.del)}
	// fail records a timeout on key's volume; it reports whether the
	// write stops there.
	fail := func(key string, err error) bool {
		if g.kind == QEMU {
			c.err = err
			return true
		}
		if c.errs == nil {
			c.errs = map[string]string{}
		}
		if g.running() {
			c.errs[key] = fmt.Sprintf("unable to hotplug %s: %s", key, err) // vmconfig_hotplug_pending
		} else {
			c.errs[key] = fmt.Sprintf("unable to apply pending change %s : %s", key, err) // vmconfig_apply_pending
		}
		return false
	}
	dels := ch.del
	if g.kind == LXC {
		dels = slices.Sorted(slices.Values(dels))
	}
	for i, k := range dels {
		// A volume of another guest is dropped without a free
		// (try_deallocate_drive, delete_mountpoint_volume).
		vol := volid(g.conf[k])
		sid, ok := volumeStorage(vol)
		if !strings.HasPrefix(k, "unused") || !ok || volumeOwner(vol) != g.vmid {
			continue
		}
		if err := c.run.take(sid); err != nil {
			if fail(k, err) {
				c.dels = i
				return c
			}
			continue
		}
		c.freed = append(c.freed, vol)
	}
	for _, k := range sortedKeys(ch.allocs) {
		sid := ch.allocs[k]
		err := c.run.take(sid)
		if err == nil && g.kind == QEMU && g.template() {
			err = c.run.take(sid) // create_disks: vdisk_create_base
		}
		if err != nil {
			if fail(k, err) {
				return c
			}
			continue
		}
		c.allocs = append(c.allocs, k)
	}
	return c
}

// applyWrite applies a config write whose locks are taken, and returns
// what its call or task returns: the change's warnings, or the failure
// (a QEMU write's partial state written first; a container's unused
// volumes freed before a failure stay freed, its config unchanged).
// Caller holds s.mu.
func (s *Sim) applyWrite(g *guest, ch *configChange, c *configLocks) ([]string, error) {
	switch {
	case c.err != nil:
		g.partialWrite(ch, c)
		return nil, c.err
	case len(c.errs) > 0:
		s.markFreed(g, c.freed)
		return nil, paramErr(c.errs)
	}
	return g.apply(ch), nil
}

// partialWrite is what update_vm_api has written when a volume's lock
// times out: the deletions before it (an unusedN, vmstate and tags
// removed, any other key a pending deletion) and the options set before
// it, pending (it applies the pending changes only at its end). It sets
// options in Perl's hash order; the simulator takes the allocations
// first, in sorted order, so the sets before the failure are the
// allocations before it. Caller holds the sim's lock.
func (g *guest) partialWrite(ch *configChange, c *configLocks) {
	for _, k := range ch.del[:c.dels] {
		_, inConf := g.conf[k]
		_, inPending := g.pending[k]
		if !inConf && !inPending {
			continue // "cannot delete '…' - not set in current configuration!"
		}
		delete(g.pending, k)
		if strings.HasPrefix(k, "unused") || k == "vmstate" || k == "tags" {
			delete(g.conf, k)
		} else {
			g.pendingDel[k] = ch.force // add_to_pending_delete
		}
	}
	for _, k := range c.allocs {
		g.pending[k] = ch.set[k]
		delete(g.pendingDel, k)
	}
	g.touch()
}
