package executor

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/planner"
)

// The scenario harness's commands that set up guests, observations and
// actions.

func (h *xharness) guest(args []string) (string, error) {
	vmid, err := strconv.Atoi(args[0])
	if err != nil {
		return "", err
	}
	g := h.px.guests[vmid]
	if g == nil {
		g = &fakeGuest{status: "stopped", digest: "d1", cfg: pve.GuestConfig{Name: "vm" + args[0], Cores: 1, MemoryMiB: 512}}
		h.px.guests[vmid] = g
	}
	for _, kv := range args[1:] {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "status":
			g.status = v
		case "lock":
			g.lock = v
		case "digest":
			g.digest = v
		case "cores":
			g.cfg.Cores, _ = strconv.Atoi(v)
		case "description":
			g.cfg.Description = v
		case "protected":
			g.cfg.Protected = v == "true"
		case "node":
			g.node = v
		case "snap":
			g.snaps = append(g.snaps, v)
		case "gone":
			delete(h.px.guests, vmid)
		default:
			if disk, ok := strings.CutPrefix(k, "disk."); ok {
				// disk.scsi0=local-lvm:vm-101-disk-0,size=8G
				if g.cfg.Raw == nil {
					g.cfg.Raw = map[string]string{}
				}
				g.cfg.Raw[disk] = v
				continue
			}
			return "", fmt.Errorf("unknown guest key %q", k)
		}
	}
	return "", nil
}

func (h *xharness) observe(args []string) (string, error) {
	vmid, err := strconv.Atoi(args[0])
	if err != nil {
		return "", err
	}
	o := events.Observed{Meta: events.NewMeta("observer@test", "", h.clk.Now()), VMID: vmid, Cluster: "pve", Exists: true,
		Node: "pve1", Kind: events.QEMU, Status: "stopped", ReadAt: h.clk.Now(), Source: events.SourceObserver}
	// The scripted guest's config and digest as read now; its power
	// state only when given (status=), so that a script can act on a
	// read the guest has since left behind.
	if g := h.px.guests[vmid]; g != nil {
		o.Digest, o.Config.Cores, o.Config.MemoryMiB, o.Config.Name = g.digest, g.cfg.Cores, g.cfg.MemoryMiB, g.cfg.Name
		o.Config.Tags = []string{}
		c := g.cfg
		c.Ref = pve.GuestRef{Kind: pve.KindQEMU, Node: "pve1", VMID: vmid}
		o.Config.Disks = c.Managed().Disks
		if g.node != "" {
			o.Node = g.node
		}
	}
	for _, kv := range args[1:] {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "status":
			o.Status = v
		case "pending":
			pk, pv, _ := strings.Cut(v, ":")
			o.Pending = map[string]string{pk: pv}
		case "ha":
			// Under HA groups (PVE 8): the observer read how HA places it.
			o.HA = v
			if v != "" {
				o.HAPlacement = &events.HAPlacement{Groups: true}
			}
		case "read_at":
			d, err := time.ParseDuration(v)
			if err != nil {
				return "", err
			}
			o.ReadAt = h.clk.Now().Add(d)
		case "after":
			if o.AfterSeq, err = strconv.ParseUint(v, 10, 64); err != nil {
				return "", err
			}
		case "kind":
			o.Kind = events.GuestKind(v)
		default:
			return "", fmt.Errorf("unknown observation key %q", k)
		}
	}
	body, _ := json.Marshal(o)
	seq := h.publish(events.KindObserved, vmid, nil, body)
	h.lastO[vmid], h.digest[vmid] = seq, o.Digest
	return fmt.Sprintf("observed %d\n", seq), nil
}

func (h *xharness) action(args []string) (string, error) {
	if len(args) < 2 {
		return "", fmt.Errorf("want VMID OP")
	}
	vmid, err := strconv.Atoi(args[0])
	if err != nil {
		return "", err
	}
	h.n++
	a := events.Action{Meta: events.NewMeta("planner@test", "corr-"+strconv.Itoa(h.n), h.clk.Now()),
		ID: fmt.Sprintf("pve-%d-%d", vmid, h.n), VMID: vmid, Cluster: "pve", Node: "pve1", Kind: events.QEMU,
		Op: events.Op(args[1]), Reason: "scenario", DesiredSeq: h.lastD[vmid], BasisSeq: h.lastO[vmid], Attempt: 1,
		Digest: h.digest[vmid], FoldSeq: uint64(len(h.j.Entries()))}
	if a.Op == events.OpShutdown || a.Op == events.OpReboot {
		a.Timeout = planner.DefaultShutdownTimeout // as the planner plans it (a clean reboot is bounded too)
	}
	for _, kv := range args[2:] {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case k == "desired":
			a.DesiredSeq, err = strconv.ParseUint(v, 10, 64)
		case k == "basis":
			a.BasisSeq, err = strconv.ParseUint(v, 10, 64)
		case k == "digest":
			a.Digest = v
		case strings.HasPrefix(k, "set."):
			if a.Set == nil {
				a.Set = map[string]string{}
			}
			a.Set[strings.TrimPrefix(k, "set.")] = v
		case k == "revert":
			a.Revert = append(a.Revert, v)
		case k == "timeout":
			a.Timeout, err = time.ParseDuration(v)
		case k == "node":
			a.Node = v
		case k == "fold":
			a.FoldSeq, err = strconv.ParseUint(v, 10, 64)
		case k == "clone":
			// clone=FROM@NODE: a linked clone of template FROM on NODE,
			// onto the action's node.
			from, node, _ := strings.Cut(v, "@")
			a.Clone = &events.CloneOp{FromNode: node}
			a.Clone.From, err = strconv.Atoi(from)
			a.Digest = ""
		case k == "kind":
			a.Kind = events.GuestKind(v)
		case k == "migrate":
			// migrate=TARGET[,online][,restart][,ha]
			parts := strings.Split(v, ",")
			a.Migrate = &events.MigrateOp{Target: parts[0], Online: slices.Contains(parts, "online"),
				Restart: slices.Contains(parts, "restart"), HA: slices.Contains(parts, "ha")}
		case k == "snapshot":
			// snapshot=OP: the protective snapshot before OP
			a.Snapshot = &events.SnapshotOp{Name: events.SnapshotName(a.ID), Before: events.Op(v)}
		case k == "resize":
			// resize=DISK:GIB
			disk, gib, _ := strings.Cut(v, ":")
			a.Resize = &events.ResizeOp{Disk: disk}
			a.Resize.SizeGiB, err = strconv.ParseInt(gib, 10, 64)
		default:
			return "", fmt.Errorf("unknown action key %q", k)
		}
		if err != nil {
			return "", err
		}
	}
	body, _ := json.Marshal(a)
	seq := h.publish(events.KindAction, vmid, nil, body)
	return fmt.Sprintf("action %d id=%s\n", seq, a.ID), nil
}
