package pve

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Operations beyond create/config/power/clone/delete: disk resize,
// migration (direct and through HA), HA requested state, snapshots,
// cloud-init regeneration and resource pools.

// Op values of these operations.
const (
	OpResize         Op = "resize"
	OpMigrate        Op = "migrate"
	OpHAMigrate      Op = "ha-migrate"
	OpHASetState     Op = "ha-set-state"
	OpSnapshot       Op = "snapshot"
	OpReadSnapshots  Op = "read-snapshots"
	OpDeleteSnapshot Op = "delete-snapshot"
	OpRollback       Op = "rollback"
	OpCloudinit      Op = "cloudinit"
	OpCreatePool     Op = "create-pool"
	OpPoolMembers    Op = "pool-members"
)

// opsTaskTypes maps the task types of these operations (without their
// qm/vz prefix) to their Op, for UPID.Op.
var opsTaskTypes = map[string]Op{
	"resize":      OpResize,
	"migrate":     OpMigrate,
	"snapshot":    OpSnapshot,
	"delsnapshot": OpDeleteSnapshot,
	"rollback":    OpRollback,
}

// classifyOpsMessage classifies Proxmox's refusals of these operations
// that ClassifyOpMessage does not know (m is lower-cased): preconditions
// that fail again unchanged are ClassTerminal, a missing pool ClassGone for
// the pool calls, an existing snapshot or pool ClassConflict via "already
// exists" (handled before this is called).
func classifyOpsMessage(op Op, m string) (Class, bool) {
	switch {
	case strings.Contains(m, "shrinking disks is not supported"),
		strings.Contains(m, "unable to shrink disk size"),
		strings.Contains(m, "you can't resize a cdrom"),
		strings.Contains(m, "has no associated volume"),
		strings.Contains(m, "can't migrate"),
		strings.Contains(m, "cannot migrate"),
		strings.Contains(m, "target is local node"),
		strings.Contains(m, "migration aborted"),
		strings.Contains(m, "live migration is currently not implemented"),
		strings.Contains(m, "snapshot feature is not available"),
		strings.Contains(m, "invalid format - invalid configuration id"),
		strings.Contains(m, "no such snapshot"),
		strings.Contains(m, "snapshot name"),
		strings.Contains(m, "no cloudinit drive"),
		strings.Contains(m, "no such resource"),
		strings.Contains(m, "is not ha managed"):
		return ClassTerminal, true
	case op == OpResize && strings.Contains(m, "already at specified size"):
		return ClassAlreadyDone, true
	case (op == OpCreatePool || op == OpPoolMembers) && strings.Contains(m, "pool '") && strings.Contains(m, "does not exist"):
		return ClassGone, true
	}
	return ClassUnknown, false
}

// Resize grows a disk ("scsi0", LXC "rootfs"/"mpN") to size: "+10G" adds,
// "40G" (K/M/G/T, bytes without unit) is absolute. Proxmox never shrinks
// (ClassTerminal); an LXC disk already at that size is ClassAlreadyDone
// (QEMU's task just succeeds). The new size is applied at once, also on a
// running guest with pending changes. QEMU answers with a task from PVE 8
// (zero TaskRef on PVE 7); LXC always with a task.
func (c *Client) Resize(ctx context.Context, ref GuestRef, disk, size string) (TaskRef, error) {
	if !resizeDiskRE.MatchString(disk) || !resizeSizeRE.MatchString(size) {
		err := fmt.Errorf("resize of disk %q to %q: not a disk key and size PVE accepts", disk, size)
		return TaskRef{}, &Error{Class: ClassTerminal, Op: OpResize, Ref: ref, Message: err.Error(), Err: err}
	}
	return c.mutate(ctx, OpResize, ref, http.MethodPut, ref.path()+"/resize", map[string]any{"disk": disk, "size": size})
}

var (
	resizeDiskRE = regexp.MustCompile(`^((ide|sata|scsi|virtio|mp)\d+|rootfs|efidisk0|tpmstate0)$`)
	resizeSizeRE = regexp.MustCompile(`^\+?\d+(\.\d+)?[KMGT]?$`)
)

// MigrateSpec is a migration to another node of the cluster.
type MigrateSpec struct {
	Target string // the node to move to (not the current one)
	// Online migrates a running VM live; without it Proxmox refuses a
	// running VM. Ignored for containers (Proxmox cannot live-migrate them).
	Online bool
	// WithLocalDisks lets a running VM's local disks move along (live
	// storage migration); without it a live migration of a VM with local
	// disks fails in its task.
	WithLocalDisks bool
	// Restart migrates a running container by shutting it down (waiting
	// at most Timeout, 0: Proxmox's 180 s) and starting it on the target.
	Restart bool
	// TargetStorage maps local volumes to a storage on the target ("" keeps
	// each on its own storage id; "a:b,c:d" or one storage id for all).
	TargetStorage string
	Timeout       time.Duration
}

// Migrate moves a guest to spec.Target with a qmigrate/vzmigrate task;
// the guest is locked "migrate" while it runs and is on the target node
// when it ends (address it there afterwards). An HA-managed guest is only
// requested to move (an "hamigrate" task; the HA stack moves it later).
// Refusals (target is the current node, a running guest without
// Online/Restart, an unknown node) are ClassTerminal.
func (c *Client) Migrate(ctx context.Context, ref GuestRef, spec MigrateSpec) (TaskRef, error) {
	if !nodeNameRE.MatchString(spec.Target) {
		err := fmt.Errorf("migration target %q is not a valid PVE node name", spec.Target)
		return TaskRef{}, &Error{Class: ClassTerminal, Op: OpMigrate, Ref: ref, Message: err.Error(), Err: err}
	}
	body := map[string]any{"target": spec.Target}
	if ref.Kind == KindLXC {
		if spec.Restart {
			body["restart"] = 1
			if spec.Timeout > 0 {
				body["timeout"] = int64(math.Ceil(spec.Timeout.Seconds()))
			}
		}
		if spec.TargetStorage != "" {
			body["target-storage"] = spec.TargetStorage
		}
	} else {
		if spec.Online {
			body["online"] = 1
		}
		if spec.WithLocalDisks {
			body["with-local-disks"] = 1
		}
		if spec.TargetStorage != "" {
			body["targetstorage"] = spec.TargetStorage
		}
	}
	return c.mutate(ctx, OpMigrate, ref, http.MethodPost, ref.path()+"/migrate", body)
}

var haSIDRE = regexp.MustCompile(`^(vm|ct):\d+$`)

func (c *Client) haCall(ctx context.Context, op Op, method, path string, body map[string]any) error {
	var raw json.RawMessage
	return c.do(ctx, op, GuestRef{}, method, path, body, &raw)
}

// HAMigrate asks the HA stack to move an HA-managed guest ("vm:100",
// "ct:101") to node. Proxmox only queues the request: the call returns
// before the guest moves, so read the inventory to see it arrive.
func (c *Client) HAMigrate(ctx context.Context, sid, node string) error {
	if !haSIDRE.MatchString(sid) || !nodeNameRE.MatchString(node) {
		err := fmt.Errorf("HA migrate of %q to %q: not an HA resource id and node name", sid, node)
		return &Error{Class: ClassTerminal, Op: OpHAMigrate, Message: err.Error(), Err: err}
	}
	return c.haCall(ctx, OpHAMigrate, http.MethodPost, "/cluster/ha/resources/"+sid+"/migrate", map[string]any{"node": node})
}

// HASetState sets an HA resource's requested state (started, stopped,
// disabled, ignored). The HA stack then starts or stops the guest a little
// later; the call does not wait for it.
func (c *Client) HASetState(ctx context.Context, sid, state string) error {
	switch state {
	case "started", "stopped", "disabled", "ignored", "enabled":
	default:
		err := fmt.Errorf("HA state %q is none of started, stopped, disabled, ignored", state)
		return &Error{Class: ClassTerminal, Op: OpHASetState, Message: err.Error(), Err: err}
	}
	if !haSIDRE.MatchString(sid) {
		err := fmt.Errorf("%q is not an HA resource id", sid)
		return &Error{Class: ClassTerminal, Op: OpHASetState, Message: err.Error(), Err: err}
	}
	return c.haCall(ctx, OpHASetState, http.MethodPut, "/cluster/ha/resources/"+sid, map[string]any{"state": state})
}

// Snapshot is one entry of a guest's snapshot list. The entry named
// "current" (Proxmox's "You are here!") is the running state; Parent names
// the snapshot it follows.
type Snapshot struct {
	Name        string
	Description string
	Parent      string
	SnapTime    time.Time // zero for "current"
	VMState     bool      // QEMU: RAM included
}

var snapNameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_\-]{1,39}$`)

// Snapshot takes a snapshot named name (PVE's pve-configid rules: a letter
// first, then letters, digits, '-' and '_', 2..40 characters); the guest
// is locked "snapshot" while the task runs. A taken name is ClassConflict.
func (c *Client) Snapshot(ctx context.Context, ref GuestRef, name, description string) (TaskRef, error) {
	if !snapNameRE.MatchString(name) || name == "current" || name == "vzdump" {
		err := fmt.Errorf("%q is not a snapshot name Proxmox accepts", name)
		return TaskRef{}, &Error{Class: ClassTerminal, Op: OpSnapshot, Ref: ref, Message: err.Error(), Err: err}
	}
	body := map[string]any{"snapname": name}
	if description != "" {
		body["description"] = description
	}
	return c.mutate(ctx, OpSnapshot, ref, http.MethodPost, ref.path()+"/snapshot", body)
}

// Snapshots lists a guest's snapshots, oldest first, with "current" last.
func (c *Client) Snapshots(ctx context.Context, ref GuestRef) ([]Snapshot, error) {
	if err := ref.Validate(); err != nil {
		return nil, &Error{Class: ClassTerminal, Op: OpReadSnapshots, Ref: ref, Message: err.Error(), Err: err}
	}
	var raw json.RawMessage
	if err := c.do(ctx, OpReadSnapshots, ref, http.MethodGet, ref.path()+"/snapshot", nil, &raw); err != nil {
		return nil, err
	}
	var items []struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parent      string          `json:"parent"`
		SnapTime    json.Number     `json:"snaptime"`
		VMState     json.RawMessage `json:"vmstate"`
	}
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, &Error{Class: ClassUnknown, Op: OpReadSnapshots, Ref: ref, Message: err.Error(), Err: err}
	}
	out := make([]Snapshot, 0, len(items))
	for _, it := range items {
		sn := Snapshot{Name: it.Name, Description: it.Description, Parent: it.Parent}
		if n, err := it.SnapTime.Int64(); err == nil && n > 0 {
			sn.SnapTime = time.Unix(n, 0)
		}
		v := strings.Trim(string(it.VMState), `"`)
		sn.VMState = v == "1" || v == "true"
		out = append(out, sn)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if (out[i].Name == "current") != (out[j].Name == "current") {
			return out[j].Name == "current"
		}
		return out[i].SnapTime.Before(out[j].SnapTime)
	})
	return out, nil
}

// DeleteSnapshot removes a snapshot (a qmdelsnapshot/vzdelsnapshot task;
// the guest is locked "snapshot-delete" meanwhile). A missing one is
// ClassTerminal.
func (c *Client) DeleteSnapshot(ctx context.Context, ref GuestRef, name string) (TaskRef, error) {
	if !snapNameRE.MatchString(name) {
		err := fmt.Errorf("%q is not a snapshot name", name)
		return TaskRef{}, &Error{Class: ClassTerminal, Op: OpDeleteSnapshot, Ref: ref, Message: err.Error(), Err: err}
	}
	return c.mutate(ctx, OpDeleteSnapshot, ref, http.MethodDelete, ref.path()+"/snapshot/"+url.PathEscape(name), nil)
}

// RegenerateCloudinit rebuilds a QEMU VM's cloud-init drive from its
// config (PUT …/cloudinit, synchronous), which also applies pending
// cloud-init keys of a running VM.
func (c *Client) RegenerateCloudinit(ctx context.Context, ref GuestRef) error {
	if ref.Kind != KindQEMU {
		err := fmt.Errorf("cloud-init is QEMU only, %v is not a VM", ref)
		return &Error{Class: ClassTerminal, Op: OpCloudinit, Ref: ref, Message: err.Error(), Err: err}
	}
	_, err := c.mutate(ctx, OpCloudinit, ref, http.MethodPut, ref.path()+"/cloudinit", nil)
	return err
}

var poolIDRE = regexp.MustCompile(`^[A-Za-z0-9.\-_]+(/[A-Za-z0-9.\-_]+){0,2}$`)

// CreatePool creates a resource pool (POST /pools). An existing one is
// ClassConflict.
func (c *Client) CreatePool(ctx context.Context, id string) error {
	if !poolIDRE.MatchString(id) {
		err := fmt.Errorf("pool name %q contains invalid characters", id)
		return &Error{Class: ClassTerminal, Op: OpCreatePool, Message: err.Error(), Err: err}
	}
	var raw json.RawMessage
	return c.do(ctx, OpCreatePool, GuestRef{}, http.MethodPost, "/pools", map[string]any{"poolid": id}, &raw)
}

// SetPoolMembers adds guests to a pool (PUT /pools/{pool} vms=…), or with
// remove takes them out of it. Proxmox refuses to add a guest that is in
// another pool (ClassConflict via "already") or that does not exist.
func (c *Client) SetPoolMembers(ctx context.Context, pool string, vmids []int, remove bool) error {
	if !poolIDRE.MatchString(pool) || len(vmids) == 0 {
		err := fmt.Errorf("pool %q members %v: nothing to change or an invalid pool name", pool, vmids)
		return &Error{Class: ClassTerminal, Op: OpPoolMembers, Message: err.Error(), Err: err}
	}
	ids := make([]string, len(vmids))
	for i, id := range vmids {
		ids[i] = strconv.Itoa(id)
	}
	body := map[string]any{"vms": strings.Join(ids, ",")}
	if remove {
		body["delete"] = 1
	}
	var raw json.RawMessage
	return c.do(ctx, OpPoolMembers, GuestRef{}, http.MethodPut, "/pools/"+url.PathEscape(pool), body, &raw)
}
