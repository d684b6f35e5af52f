package pve

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strings"
	"time"
)

// Operations beyond create/config/power/clone/delete: disk resize,
// migration (direct and through HA) and HA requested state. Snapshots and
// cloud-init regeneration are in snapshot.go, pools in pool.go.

// Op values of these operations.
const (
	OpResize     Op = "resize"
	OpMigrate    Op = "migrate"
	OpHAMigrate  Op = "ha-migrate"
	OpHASetState Op = "ha-set-state"
)

// opsTaskTypes maps the task types of these operations (without their
// qm/vz prefix) to their Op, for UPID.Op.
var opsTaskTypes = map[string]Op{
	"resize":      OpResize,
	"migrate":     OpMigrate,
	"snapshot":    OpSnapshot,
	"delsnapshot": OpDeleteSnapshot,
}

// classifyOpsMessage classifies Proxmox's refusals of these operations
// that ClassifyOpMessage does not know (m is lower-cased): preconditions
// that fail again unchanged are ClassTerminal.
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
		strings.Contains(m, "no such resource"),
		strings.Contains(m, "is not ha managed"),
		strings.Contains(m, "snapshot feature is not available"),
		strings.Contains(m, "you can't take a snapshot if it's a template"),
		strings.Contains(m, "you can't delete a snapshot if vm is a template"),
		strings.Contains(m, "unable to use snapshot name"),
		strings.Contains(m, "unable to create template, because"):
		return ClassTerminal, true
	case op == OpSetHARule && (strings.Contains(m, "is invalid") || strings.Contains(m, "cannot use unmanaged resource") ||
		strings.Contains(m, "cannot use non-existent node") || strings.Contains(m, "have not been migrated yet")):
		// Rules.pm's refusals: an infeasible rule ("Rule 'x' is
		// invalid.", inside lock_ha_domain's 500), a guest out of HA, a
		// node not in the cluster, groups not migrated. The same rule is
		// refused again until the desired state or the cluster changes.
		return ClassTerminal, true
	case op == OpSnapshot && strings.Contains(m, "already used"):
		// "snapshot name 'x' already used": another snapshot holds the
		// name, maybe not the one intended.
		return ClassConflict, true
	case op == OpSetPool && (strings.Contains(m, "is already a pool member") || strings.Contains(m, "is not a pool member")):
		return ClassAlreadyDone, true
	case op == OpSetPool && strings.Contains(m, "belongs already to pool"):
		return ClassConflict, true
	case op == OpResize && strings.Contains(m, "already at specified size"):
		return ClassAlreadyDone, true
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
	if !IsDiskKey(ref.Kind, disk) || !resizeSizeRE.MatchString(size) {
		err := fmt.Errorf("resize of disk %q to %q: not a disk key and size PVE accepts", disk, size)
		return TaskRef{}, &Error{Class: ClassTerminal, Op: OpResize, Ref: ref, Message: err.Error(), Err: err}
	}
	return c.mutate(ctx, OpResize, ref, http.MethodPut, ref.path()+"/resize", map[string]any{"disk": disk, "size": size})
}

var (
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

func (c *Client) haCall(ctx context.Context, op Op, method, path string, body map[string]any) error {
	return c.do(ctx, op, GuestRef{}, method, path, body, nil)
}

// HAMigrate asks the HA stack to move an HA-managed guest to node.
// Proxmox only queues the request: the call returns before the guest
// moves, so read the inventory to see it arrive.
func (c *Client) HAMigrate(ctx context.Context, ref GuestRef, node string) error {
	if err := ref.Validate(); err != nil || !nodeNameRE.MatchString(node) {
		err := fmt.Errorf("HA migrate of %s to %q: not a guest and node name", haSID(ref), node)
		return &Error{Class: ClassTerminal, Op: OpHAMigrate, Ref: ref, Message: err.Error(), Err: err}
	}
	return c.haCall(ctx, OpHAMigrate, http.MethodPost, "/cluster/ha/resources/"+haSID(ref)+"/migrate", map[string]any{"node": node})
}

// HASetState sets an HA-managed guest's requested state (started,
// stopped, disabled, ignored). The HA stack then starts or stops the guest
// a little later; the call does not wait for it.
func (c *Client) HASetState(ctx context.Context, ref GuestRef, state string) error {
	switch state {
	case "started", "stopped", "disabled", "ignored", "enabled":
	default:
		err := fmt.Errorf("HA state %q is none of started, stopped, disabled, ignored", state)
		return &Error{Class: ClassTerminal, Op: OpHASetState, Ref: ref, Message: err.Error(), Err: err}
	}
	if err := ref.Validate(); err != nil {
		return &Error{Class: ClassTerminal, Op: OpHASetState, Ref: ref, Message: err.Error(), Err: err}
	}
	return c.haCall(ctx, OpHASetState, http.MethodPut, "/cluster/ha/resources/"+haSID(ref), map[string]any{"state": state})
}
