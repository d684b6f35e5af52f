package pve

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/converge-pve/converge/events"
)

// TaskRef identifies the Proxmox task a mutation started. Journal it before
// waiting, so a resumed executor waits on it instead of issuing again. The
// zero TaskRef (UPID "") means Proxmox completed the call synchronously.
type TaskRef struct {
	UPID string
	Node string // node running the task (from the UPID)
}

// IsZero reports a synchronous completion (no task to wait for).
func (t TaskRef) IsZero() bool { return t.UPID == "" }

// DefaultShutdownTimeout is sent when Shutdown gets no positive timeout: PVE
// reads an explicit LXC timeout=0 as "wait 0 s", so one is always sent.
const DefaultShutdownTimeout = 60 * time.Second

// Start powers a guest on. "already running" classifies as ClassAlreadyDone
// (an HTTP 500 for LXC, a failed task for QEMU). For HA-managed guests the
// task only requests the state: check with VerifyPower afterwards.
func (c *Client) Start(ctx context.Context, ref GuestRef) (TaskRef, error) {
	return c.mutate(ctx, OpStart, ref, http.MethodPost, ref.path()+"/status/start", nil)
}

// Stop powers a guest off hard. "not running" classifies as ClassAlreadyDone.
func (c *Client) Stop(ctx context.Context, ref GuestRef) (TaskRef, error) {
	return c.mutate(ctx, OpStop, ref, http.MethodPost, ref.path()+"/status/stop", nil)
}

// Shutdown asks the guest OS to power off within timeout (rounded up to whole
// seconds; <= 0 means DefaultShutdownTimeout), then stops it hard if
// forceStop. Without forceStop a timeout fails the task (ClassTransient).
func (c *Client) Shutdown(ctx context.Context, ref GuestRef, timeout time.Duration, forceStop bool) (TaskRef, error) {
	if timeout <= 0 {
		timeout = DefaultShutdownTimeout
	}
	body := map[string]any{
		"timeout":   int64(math.Ceil(timeout.Seconds())),
		"forceStop": boolInt(forceStop),
	}
	return c.mutate(ctx, OpShutdown, ref, http.MethodPost, ref.path()+"/status/shutdown", body)
}

// Reboot restarts a running guest cleanly: Proxmox shuts it down
// (waiting at most timeout; 0: Proxmox's default) and starts it again,
// which applies pending changes. "not running" is ClassTerminal here:
// there is nothing to reboot.
func (c *Client) Reboot(ctx context.Context, ref GuestRef, timeout time.Duration) (TaskRef, error) {
	var body map[string]any
	if timeout > 0 {
		body = map[string]any{"timeout": int64(math.Ceil(timeout.Seconds()))}
	}
	return c.mutate(ctx, OpReboot, ref, http.MethodPost, ref.path()+"/status/reboot", body)
}

// ConfigChange is a config update in PVE's own keys (QEMU "name" is mapped to
// "hostname" for LXC).
type ConfigChange struct {
	// Set maps keys to values. Tags are normalised and ';'-joined, memory
	// is sent as plain MiB. An empty value deletes the key: PVE stores ""
	// as an unparsable line (tags) or drops it inconsistently.
	Set map[string]string
	// Delete lists keys to remove.
	Delete []string
	// Revert lists keys whose pending value (or pending deletion) is
	// dropped, the applied value kept: Proxmox's revert parameter. A key
	// may not be both reverted and set or deleted (Proxmox refuses it).
	Revert []string
	// Digest is the digest of the config the change was planned from.
	// Proxmox refuses the write (ClassConflict) if the config changed since.
	Digest string
}

var configKeyRE = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)

// reservedKeys are API parameters, not config keys.
var reservedKeys = map[string]bool{
	"digest": true, "delete": true, "revert": true, "skiplock": true,
	"background_delay": true, "node": true, "vmid": true,
}

// UpdateConfig writes a config change. LXC only has the synchronous PUT
// (zero TaskRef). QEMU uses it too for a change that allocates or attaches
// no drive: the write is done within the call, as Terraform's providers
// make it, with no worker forked and no task in the node's task list.
// A change of drives (allocation can take long) uses the asynchronous
// POST with background_delay (Config.ConfigTaskWait): a zero TaskRef when
// the task finished within it, its error when it failed, the task
// otherwise; so does every QEMU write when ConfigTaskWait is 0 (every
// write a task). An empty change sends nothing and returns a zero
// TaskRef.
func (c *Client) UpdateConfig(ctx context.Context, ref GuestRef, ch ConfigChange) (TaskRef, error) {
	body, err := configBody(ref.Kind, ch)
	if err != nil {
		return TaskRef{}, &Error{Class: ClassTerminal, Op: OpUpdateConfig, Ref: ref, Message: err.Error(), Err: err}
	}
	if body == nil {
		return TaskRef{}, nil
	}
	method := http.MethodPost
	switch {
	case ref.Kind == KindLXC, c.configWait > 0 && !touchesDrives(ref.Kind, ch):
		method = http.MethodPut
	case c.configWait > 0:
		body["background_delay"] = c.configWait
	}
	return c.mutate(ctx, OpUpdateConfig, ref, method, ref.path()+"/config", body)
}

// configBody builds the request body of a ConfigChange; nil when there is
// nothing to change.
func configBody(kind Kind, ch ConfigChange) (map[string]any, error) {
	body := map[string]any{}
	del := map[string]bool{}
	for k, v := range ch.Set {
		if kind == KindLXC && k == "name" {
			k = "hostname"
		}
		if !configKeyRE.MatchString(k) || reservedKeys[k] {
			return nil, fmt.Errorf("%q is not a settable config key", k)
		}
		switch k {
		case "tags":
			v = events.FormatTags(events.ParseTags(v))
		case "memory":
			if v != "" {
				mib, err := ParseMemoryMiB(v)
				if err != nil {
					return nil, err
				}
				v = strconv.Itoa(mib) // never "current=…": go-proxmox cannot read it back
			}
		}
		if v == "" {
			del[k] = true
			continue
		}
		body[k] = v
	}
	for _, k := range ch.Delete {
		if kind == KindLXC && k == "name" {
			k = "hostname"
		}
		if !configKeyRE.MatchString(k) || reservedKeys[k] {
			return nil, fmt.Errorf("%q is not a deletable config key", k)
		}
		if _, set := body[k]; set {
			return nil, fmt.Errorf("key %q is both set and deleted", k)
		}
		del[k] = true
	}
	revert := map[string]bool{}
	for _, k := range ch.Revert {
		if kind == KindLXC && k == "name" {
			k = "hostname"
		}
		if !configKeyRE.MatchString(k) || reservedKeys[k] {
			return nil, fmt.Errorf("%q is not a revertible config key", k)
		}
		if _, set := body[k]; set || del[k] {
			return nil, fmt.Errorf("key %q is both reverted and set or deleted", k)
		}
		revert[k] = true
	}
	if len(body) == 0 && len(del) == 0 && len(revert) == 0 {
		return nil, nil
	}
	if len(revert) > 0 {
		body["revert"] = strings.Join(slices.Sorted(maps.Keys(revert)), ",")
	}
	if len(del) > 0 {
		keys := make([]string, 0, len(del))
		for k := range del {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		body["delete"] = strings.Join(keys, ",")
	}
	if ch.Digest != "" {
		body["digest"] = ch.Digest
	}
	return body, nil
}

// CloneSpec describes a clone. NewID is required: converge chooses ids, it
// never asks /cluster/nextid (racy between executors).
type CloneSpec struct {
	NewID       int
	Name        string // QEMU name / LXC hostname
	TargetNode  string // "" = the source's node
	Full        *bool  // nil = PVE default (linked from templates, full otherwise)
	Storage     string // target storage for full clones
	Description string
	// Pool is the resource pool the new guest joins when the task ends
	// ("" none). Proxmox refuses a pool that does not exist
	// (ClassTerminal) before anything is created.
	Pool string
}

// Clone copies src into a new guest. The new guest's config exists at once,
// locked until the task ends ("clone" for QEMU; "create" for LXC, whose
// source is locked "disk" meanwhile, so a second clone of a container
// source is ClassLocked while one runs). A taken NewID is ClassConflict;
// a clone Proxmox cannot make as asked (storage for a linked clone,
// another node from local storage, a missing pool) is ClassTerminal.
func (c *Client) Clone(ctx context.Context, src GuestRef, spec CloneSpec) (TaskRef, error) {
	if spec.NewID < MinVMID || spec.NewID > MaxVMID {
		err := fmt.Errorf("clone target vmid %d out of range %d..%d", spec.NewID, MinVMID, MaxVMID)
		return TaskRef{}, &Error{Class: ClassTerminal, Op: OpClone, Ref: src, Message: err.Error(), Err: err}
	}
	if spec.TargetNode != "" && !nodeNameRE.MatchString(spec.TargetNode) {
		err := fmt.Errorf("target node %q is not a valid PVE node name", spec.TargetNode)
		return TaskRef{}, &Error{Class: ClassTerminal, Op: OpClone, Ref: src, Message: err.Error(), Err: err}
	}
	body := map[string]any{"newid": spec.NewID}
	if spec.Name != "" {
		if src.Kind == KindLXC {
			body["hostname"] = spec.Name
		} else {
			body["name"] = spec.Name
		}
	}
	if spec.TargetNode != "" && spec.TargetNode != src.Node {
		body["target"] = spec.TargetNode
	}
	if spec.Full != nil {
		body["full"] = boolInt(*spec.Full)
	}
	if spec.Storage != "" {
		body["storage"] = spec.Storage
	}
	if spec.Description != "" {
		body["description"] = spec.Description
	}
	if spec.Pool != "" {
		body["pool"] = spec.Pool
	}
	return c.mutate(ctx, OpClone, src, http.MethodPost, src.path()+"/clone", body)
}

// Destroy deletes a guest for good, converge's only way to delete one:
// DELETE with purge=1 (it also leaves backup jobs, replication and HA) and
// destroy-unreferenced-disks=1 (volumes of its vmid its config no longer
// names go too). Proxmox refuses at the call a protected guest, an
// HA-managed one without purge and a running one (ClassTerminal), a locked
// container (ClassLocked; a locked VM fails in the task, ClassLocked too);
// a guest already gone is ClassGone.
func (c *Client) Destroy(ctx context.Context, ref GuestRef) (TaskRef, error) {
	q := url.Values{}
	q.Set("purge", "1")
	q.Set("destroy-unreferenced-disks", "1")
	return c.mutate(ctx, OpDelete, ref, http.MethodDelete, ref.path()+"?"+q.Encode(), nil)
}

// Delete destroys a guest. purge also removes it from backup jobs,
// replication and HA (required for HA-managed guests). force destroys a
// running container; QEMU has no such option (stop it first), so force is
// ignored for QEMU.
func (c *Client) Delete(ctx context.Context, ref GuestRef, purge, force bool) (TaskRef, error) {
	q := url.Values{}
	if purge {
		q.Set("purge", "1")
	}
	if force && ref.Kind == KindLXC {
		q.Set("force", "1")
	}
	path := ref.path()
	if len(q) > 0 {
		path += "?" + q.Encode() // DELETE takes its options in the query
	}
	return c.mutate(ctx, OpDelete, ref, http.MethodDelete, path, nil)
}

// mutate sends a state-changing call and returns its task. It never retries:
// a failed mutation is reported, classified, and the caller decides.
func (c *Client) mutate(ctx context.Context, op Op, ref GuestRef, method, path string, body any) (TaskRef, error) {
	if err := ref.Validate(); err != nil {
		return TaskRef{}, &Error{Class: ClassTerminal, Op: op, Ref: ref, Message: err.Error(), Err: err}
	}
	v, err := call[Value](ctx, c, op, ref, method, path, body)
	if err != nil {
		return TaskRef{}, err
	}
	t, err := taskRefOf(v, ref.Node)
	if err != nil {
		// Proxmox accepted the call but the answer is not a UPID: whatever
		// happened, it may have taken effect.
		return TaskRef{}, &Error{Class: ClassUnknown, Op: op, Ref: ref, Message: err.Error(), Err: err, Indeterminate: true}
	}
	c.log.Debug().Str("op", string(op)).Stringer("guest", ref).Str("upid", t.UPID).Msg("pve mutation issued")
	return t, nil
}

// decodeTaskRef reads a mutation's data (taskRefOf).
func decodeTaskRef(data []byte, fallbackNode string) (TaskRef, error) {
	v, err := decodeData[Value](data)
	if err != nil {
		return TaskRef{}, err
	}
	return taskRefOf(v, fallbackNode)
}

// taskRefOf reads a mutation's data: a UPID string, or null (or "") for a
// synchronous completion.
func taskRefOf(v Value, fallbackNode string) (TaskRef, error) {
	if v.IsNull() {
		return TaskRef{}, nil
	}
	if v.kind != kindString {
		return TaskRef{}, fmt.Errorf("mutation answer %.100s is neither a UPID nor null", v.Text())
	}
	s := v.Text()
	if s == "" {
		return TaskRef{}, nil
	}
	u, err := ParseUPID(s)
	if err != nil {
		return TaskRef{}, err
	}
	node := u.Node
	if node == "" {
		node = fallbackNode
	}
	return TaskRef{UPID: s, Node: node}, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// touchesDrives reports whether a change sets, deletes or reverts a drive
// (a disk, CD-ROM, EFI or TPM state, cloud-init drive) or an unused
// volume: work that may allocate or free storage.
func touchesDrives(kind Kind, ch ConfigChange) bool {
	drive := func(k string) bool { return IsDiskKey(kind, k) || strings.HasPrefix(k, "unused") }
	for k := range ch.Set {
		if drive(k) {
			return true
		}
	}
	return slices.ContainsFunc(ch.Delete, drive) || slices.ContainsFunc(ch.Revert, drive)
}
