package executor

import (
	"context"
	"time"

	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/pve"
)

// Proxmox is what an executor needs from Proxmox VE. *pve.Client satisfies
// it. Every mutation sends exactly one request and returns the task to
// journal before anything waits on it (see package pve).
type Proxmox interface {
	pve.PowerController // Start, Stop, Shutdown, Reboot
	pve.ConfigWriter    // UpdateConfig
	pve.GuestReader     // GuestStatus, GuestConfig
	WaitTask(ctx context.Context, t pve.TaskRef, opts pve.WaitOptions) (pve.TaskResult, error)
	// Clone copies a template into a new guest; Destroy deletes a guest
	// with its disks (purge); RemoveHA takes it out of HA's resources.
	Clone(ctx context.Context, src pve.GuestRef, spec pve.CloneSpec) (pve.TaskRef, error)
	Destroy(ctx context.Context, ref pve.GuestRef) (pve.TaskRef, error)
	RemoveHA(ctx context.Context, ref pve.GuestRef) error
	WholeGuest
}

// WholeGuest are the operations on the whole guest: disks, placement, HA
// state, pools, snapshots and the cloud-init drive.
type WholeGuest interface {
	// Resize grows a disk to size ("32G"); Migrate moves a guest with a
	// task; HAMigrate and HASetState ask the HA manager,
	// which acts later.
	Resize(ctx context.Context, ref pve.GuestRef, disk, size string) (pve.TaskRef, error)
	Migrate(ctx context.Context, ref pve.GuestRef, spec pve.MigrateSpec) (pve.TaskRef, error)
	HAMigrate(ctx context.Context, ref pve.GuestRef, node string) error
	HASetState(ctx context.Context, ref pve.GuestRef, state string) error
	// SetHARule writes the HA node-affinity rule converge owns for an
	// HA guest (PVE 9): created, changed, or deleted with no nodes.
	SetHARule(ctx context.Context, ref pve.GuestRef, rule string, nodes []string, create bool) error
	// Snapshot takes a snapshot in a task; Snapshots lists a guest's,
	// oldest first; DeleteSnapshot removes one in a task.
	Snapshot(ctx context.Context, ref pve.GuestRef, name, description string) (pve.TaskRef, error)
	Snapshots(ctx context.Context, ref pve.GuestRef) ([]pve.Snapshot, error)
	DeleteSnapshot(ctx context.Context, ref pve.GuestRef, name string) (pve.TaskRef, error)
	// RegenerateCloudInit rewrites a VM's cloud-init drive from its config.
	RegenerateCloudInit(ctx context.Context, ref pve.GuestRef) error
	// SetPool adds a guest to a pool (moving it from another) or removes
	// it; CreatePool makes a pool.
	SetPool(ctx context.Context, pool string, vmid int, remove bool) error
	CreatePool(ctx context.Context, pool, comment string) error
}

// CloneFinder may additionally be implemented by a [Proxmox] (*pve.Client
// is one): a clone's task names its template, not the new guest, so
// TaskFinder cannot tell which clone is an action's. FindClone finds the
// clone task of src into newid started at or after since.
type CloneFinder interface {
	FindClone(ctx context.Context, src pve.GuestRef, newid int, since time.Time) (t pve.TaskRef, found bool, err error)
}

// TaskFinder may additionally be implemented by a [Proxmox]. It closes the
// one window the journal cannot: an executor that died after Proxmox
// accepted a mutation but before the task id was journalled. For a
// redelivered action with no journalled task, the executor asks the finder
// for a task of the action's operation on the guest started since the action
// was planned, and adopts it (journals it and waits on it) instead of
// issuing the mutation again. Without a finder, the guest's state is
// re-checked instead (see the package documentation). *pve.Client is one.
type TaskFinder interface {
	// FindTask returns the newest task that operation op started for
	// ref.VMID on ref.Node (one of the types [pve.TaskTypes] lists) at or
	// after since, in whole seconds, running or finished; found is false
	// when there is none.
	FindTask(ctx context.Context, ref pve.GuestRef, op pve.Op, since time.Time) (t pve.TaskRef, found bool, err error)
}

// Journal is what an executor needs of the journal (package journal's
// roles): direct reads for its record of an action and its fences, fenced
// appends for its results, and the work consumer of its partitions.
// *bus.Bus is one; journaltest.Journal, in memory, another.
type Journal interface {
	journal.Reader
	journal.Appender
	journal.Consumer
	// Info waits until the journal exists.
	Info(ctx context.Context) (journal.Info, error)
}

var (
	_ Proxmox     = (*pve.Client)(nil)
	_ TaskFinder  = (*pve.Client)(nil)
	_ CloneFinder = (*pve.Client)(nil)
)
