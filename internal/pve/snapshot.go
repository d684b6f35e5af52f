package pve

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"time"
)

// Snapshots and cloud-init regeneration of one guest.

// Op values of these operations.
const (
	OpSnapshot            Op = "snapshot"
	OpDeleteSnapshot      Op = "delete-snapshot"
	OpReadSnapshots       Op = "read-snapshots"
	OpRegenerateCloudInit Op = "regenerate-cloud-init"
)

// snapNameRE is pve-snapshot-name (pve-configid, at most 40 characters).
var snapNameRE = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9_-]{1,39}$`)

// Snapshot is one snapshot of a guest.
type Snapshot struct {
	Name        string
	Description string // as Proxmox returns it (LXC: with a trailing newline)
	Time        time.Time
	Parent      string // the snapshot it was taken after, "" for the first
	VMState     bool   // QEMU: includes RAM
	// State is "prepare" or "delete" while a task works on the snapshot.
	State string
}

func snapshotNameErr(op Op, ref GuestRef, name string) error {
	if snapNameRE.MatchString(name) && name != "current" {
		return nil
	}
	err := fmt.Errorf("snapshot name %q: PVE wants a letter, then letters, digits, '-' or '_', 2 to 40 characters, not 'current'", name)
	return &Error{Class: ClassTerminal, Op: op, Ref: ref, Message: err.Error(), Err: err}
}

// Snapshot takes a snapshot (without RAM) in a qmsnapshot/vzsnapshot
// task; the guest is locked "snapshot" while it runs. The task fails when
// the name is already used (ClassConflict), the guest is locked
// (ClassLocked) or a template (ClassTerminal).
func (c *Client) Snapshot(ctx context.Context, ref GuestRef, name, description string) (TaskRef, error) {
	if err := snapshotNameErr(OpSnapshot, ref, name); err != nil {
		return TaskRef{}, err
	}
	body := map[string]any{"snapname": name}
	if description != "" {
		body["description"] = description
	}
	return c.mutate(ctx, OpSnapshot, ref, http.MethodPost, ref.path()+"/snapshot", body)
}

// DeleteSnapshot removes a snapshot in a qmdelsnapshot/vzdelsnapshot
// task (the guest locked "snapshot-delete" meanwhile). A snapshot that
// does not exist fails the task with ClassAlreadyDone.
func (c *Client) DeleteSnapshot(ctx context.Context, ref GuestRef, name string) (TaskRef, error) {
	if err := snapshotNameErr(OpDeleteSnapshot, ref, name); err != nil {
		return TaskRef{}, err
	}
	return c.mutate(ctx, OpDeleteSnapshot, ref, http.MethodDelete, ref.path()+"/snapshot/"+name, nil)
}

// Snapshots lists a guest's snapshots, oldest first (Proxmox's "current"
// entry left out).
func (c *Client) Snapshots(ctx context.Context, ref GuestRef) ([]Snapshot, error) {
	if err := ref.Validate(); err != nil {
		return nil, &Error{Class: ClassTerminal, Op: OpReadSnapshots, Ref: ref, Message: err.Error(), Err: err}
	}
	rows, err := call[[]struct {
		Name        string `json:"name"`
		Description string `json:"description"`
		SnapTime    Value  `json:"snaptime"`
		Parent      string `json:"parent"`
		VMState     Value  `json:"vmstate"`
		SnapState   string `json:"snapstate"`
	}](ctx, c, OpReadSnapshots, ref, http.MethodGet, ref.path()+"/snapshot", nil)
	if err != nil {
		return nil, err
	}
	out := []Snapshot{}
	for _, r := range rows {
		if r.Name == "current" {
			continue
		}
		sec, _ := r.SnapTime.Float()
		// Set when the snapshot saved RAM: 1, or any other text but 0.
		vs := r.VMState.Text()
		out = append(out, Snapshot{Name: r.Name, Description: r.Description, Time: time.Unix(int64(sec), 0),
			Parent: r.Parent, VMState: vs != "" && vs != "0" && vs != "null" && vs != "false", State: r.SnapState})
	}
	// Proxmox lists them in no particular order; snapshots of one second
	// are told apart by their place in the parent chain.
	parent := map[string]string{}
	for _, sn := range out {
		parent[sn.Name] = sn.Parent
	}
	depth := func(name string) int {
		d := 0
		for p := parent[name]; p != "" && d < len(parent); p = parent[p] {
			d++
		}
		return d
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].Time.Equal(out[j].Time) {
			return out[i].Time.Before(out[j].Time)
		}
		if di, dj := depth(out[i].Name), depth(out[j].Name); di != dj {
			return di < dj
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// RegenerateCloudInit rebuilds a VM's cloud-init drive from its config
// (PUT …/cloudinit, synchronous). Proxmox does nothing, successfully, for
// a VM without a cloud-init drive; a locked VM is ClassLocked. Containers
// have no cloud-init (ClassTerminal, nothing sent).
func (c *Client) RegenerateCloudInit(ctx context.Context, ref GuestRef) error {
	if err := ref.Validate(); err != nil || ref.Kind != KindQEMU {
		if err == nil {
			err = fmt.Errorf("cloud-init regeneration is for QEMU VMs, not %s", ref.Kind)
		}
		return &Error{Class: ClassTerminal, Op: OpRegenerateCloudInit, Ref: ref, Message: err.Error(), Err: err}
	}
	return c.do(ctx, OpRegenerateCloudInit, ref, http.MethodPut, ref.path()+"/cloudinit", nil, nil)
}
