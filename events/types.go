package events

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// GuestConfig is the managed part of a guest's config, normalised so that
// Proxmox round trips never read as drift (see internal/pve).
type GuestConfig struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Tags        []string `json:"tags"`
	Cores       int      `json:"cores"`
	MemoryMiB   int      `json:"memory_mib"`
	OnBoot      bool     `json:"onboot"`
	// NUMA is the VM's numa flag (with Hotplug, below, it decides which
	// changes a running VM takes at once). Kept beside OnBoot: the two
	// bools share a word (views hold one GuestConfig per guest).
	NUMA bool `json:"numa,omitempty"`
	// Disks are the guest's disks by key (scsi0, rootfs, mp0, …), CD-ROMs
	// included (Media "cdrom").
	Disks map[string]Disk `json:"disks,omitempty"`
	// Net are the network interfaces by key (net0, …), each in the
	// canonical form Proxmox prints (QEMU "model=MAC" first, LXC "name="
	// first, then the other keys sorted).
	Net map[string]string `json:"net,omitempty"`
	// CloudInit are the cloud-init keys set (ciuser, sshkeys, ipconfigN,
	// nameserver, searchdomain, cicustom), normalised: sshkeys in the one
	// URL encoding EncodeSSHKeys writes (one key per line), ipconfig and
	// nameserver in canonical order.
	CloudInit map[string]string `json:"cloudinit,omitempty"`
	// Hotplug is the VM's hotplug feature list, sorted, "" for Proxmox's
	// default (disk,network,usb) and "none" for 0.
	Hotplug string `json:"hotplug,omitempty"`
}

// Observation sources.
const (
	SourceObserver = "observer"
	SourceExecutor = "executor"
)

// Observed is a snapshot of one guest as Proxmox showed it. Observers
// publish one when a guest changes or disappears; executors embed one in
// each final result, read back after the action.
type Observed struct {
	Meta
	VMID    int    `json:"vmid"`
	Cluster string `json:"cluster"`
	Exists  bool   `json:"exists"`
	// The three bools are kept together: they share one word (a view holds
	// an Observed per guest, and 100,000 of them add up).
	Template bool `json:"template,omitempty"`
	// Protected is Proxmox's protection flag: Proxmox refuses to destroy
	// the guest, and converge never asks.
	Protected bool      `json:"protected,omitempty"`
	Node      string    `json:"node,omitempty"`
	Kind      GuestKind `json:"kind,omitempty"`
	// Status is running, stopped, paused or unknown.
	Status string `json:"status,omitempty"`
	Lock   string `json:"lock,omitempty"`
	Digest string `json:"digest,omitempty"`
	// HA is the state the HA manager keeps the guest in ("started",
	// "stopped", …), "" when HA does not manage it.
	HA string `json:"ha,omitempty"`
	// HAPlacement is how HA places the guest (HA groups, or the HA rule
	// that places it): nil for a guest HA does not manage, and for an HA
	// guest whose cluster's HA mode was not read (unknown).
	HAPlacement *HAPlacement `json:"ha_placement,omitempty"`
	// Pool is the resource pool the guest belongs to, "" for none.
	Pool string `json:"pool,omitempty"`
	// Config holds applied values; Pending the managed keys whose new value
	// waits for a restart (PVE key names, normalised values).
	Config  GuestConfig       `json:"config"`
	Pending map[string]string `json:"pending,omitempty"`
	// ReadAt is when Proxmox was read, on the reader's clock: shown to
	// people, never used to order reads (clocks skew).
	ReadAt time.Time `json:"read_at"`
	Source string    `json:"source"`
	// AfterSeq is the journal's last sequence known to the reader before it
	// read Proxmox (0: unknown). Reads are ordered by the journal: an
	// observation supersedes the one carried by the event at sequence S
	// only if AfterSeq >= S, so a read that may have started before an
	// executor's read-back never rolls the view back, whatever the clocks.
	// An executor's read-back carries it only when derived rather than
	// read (the outcome known from the action and its basis; Digest is
	// then "", unknown): it is current as of AfterSeq. The executor
	// derives one only if no observation of the guest was journalled
	// after AfterSeq (else it reads the guest), and it is adopted as a
	// read one is: an observation journalled between that check and the
	// result was read while the action ran.
	AfterSeq uint64 `json:"after_seq,omitempty"`
}

// Heartbeat is an observer's report after each pass, reachable or not.
type Heartbeat struct {
	Meta
	Cluster   string        `json:"cluster"`
	Observer  string        `json:"observer"`
	Reachable bool          `json:"reachable"`
	Error     string        `json:"error,omitempty"`
	Pass      uint64        `json:"pass"`
	Guests    int           `json:"guests"`
	Interval  time.Duration `json:"interval_ns"`
	// VerifyPeriod bounds how long any guest's config (applied and pending
	// values) goes unread at the current estate and verification budget:
	// the longest a drift that /cluster/resources does not show can hide.
	VerifyPeriod time.Duration `json:"verify_period_ns,omitempty"`
	// AfterSeq is the journal's last sequence known to the observer before
	// this pass read the inventory (0: unknown). A pass that was reachable
	// publishes every guest it lists that the journal does not hold yet,
	// before its heartbeat: a guest whose desired state was journalled at
	// or before AfterSeq and that has no observation after the heartbeat
	// does not exist.
	AfterSeq uint64 `json:"after_seq,omitempty"`
	// Unread are guests the pass listed but could not read (their config
	// read failed) and that it never published: they exist, though the
	// journal holds no observation of them. Sorted; at most MaxUnread (a
	// pass with more vouches for nothing: no AfterSeq).
	Unread []int `json:"unread,omitempty"`
	// PVE is what the observer found the cluster runs, when it read it.
	PVE *PVEFacts `json:"pve,omitempty"`
}

// MaxUnread bounds Heartbeat.Unread.
const MaxUnread = 1000

// Op is what an action does to a guest.
type Op string

// Actions the planner emits.
const (
	OpStart     Op = "start"
	OpStop      Op = "stop"
	OpShutdown  Op = "shutdown"
	OpReboot    Op = "reboot"
	OpSetConfig Op = "set_config"
	// OpClone creates the guest as a clone of a template (Action.Clone).
	OpClone Op = "clone"
	// OpRemoveHA removes the guest from the HA manager's resources, before
	// it is destroyed.
	OpRemoveHA Op = "remove_ha"
	// OpDestroy deletes a stopped guest with purge and
	// destroy-unreferenced-disks.
	OpDestroy Op = "destroy"
	// OpHold is not work: the planner journals it instead of a step it
	// holds (the mass-change guard), so that every planner, replay and
	// `converge history` know the guest waits for an operator's approval.
	// Executors acknowledge it and touch nothing; it has no result.
	OpHold Op = "hold"
	// OpResize grows one disk (Action.Resize): Proxmox never shrinks.
	OpResize Op = "resize"
	// OpMigrate moves the guest to another node (Action.Migrate): QEMU
	// online when running, LXC by restart migration, an HA-managed guest
	// through the HA manager.
	OpMigrate Op = "migrate"
	// OpSetPool moves the guest into a resource pool, or out of its pool
	// (Action.Pool).
	OpSetPool Op = "set_pool"
	// OpSnapshot takes a protective snapshot before the action it names
	// (Action.Snapshot).
	OpSnapshot Op = "snapshot"
	// OpSetHAState asks the HA manager to keep an HA-managed guest in a
	// state (Action.HAState: started or stopped): HA, not converge,
	// starts or stops it.
	OpSetHAState Op = "set_ha_state"
	// OpSetHARule creates, changes or deletes the HA node-affinity rule
	// converge owns for an HA-managed guest (Action.HARule), under PVE 9's
	// HA rules: HA, not converge, then moves the guest.
	OpSetHARule Op = "set_ha_rule"
)

// Action is one planned Proxmox mutation.
type Action struct {
	Meta
	ID      string    `json:"id"`
	VMID    int       `json:"vmid"`
	Cluster string    `json:"cluster"`
	Node    string    `json:"node"`
	Kind    GuestKind `json:"kind"`
	Op      Op        `json:"op"`
	// Set and Delete are PVE config keys for set_config, values normalised.
	Set    map[string]string `json:"set,omitempty"`
	Delete []string          `json:"delete,omitempty"`
	// Revert drops pending values of these keys (Proxmox's revert
	// parameter): the applied value is the desired one, the pending one not.
	Revert []string `json:"revert,omitempty"`
	// Holds is the operation an OpHold action holds back.
	Holds Op `json:"holds,omitempty"`
	// Clone is what an OpClone creates; Node and Kind are then the new
	// guest's.
	Clone *CloneOp `json:"clone,omitempty"`
	// Resize, Migrate, Pool, Snapshot, HAState and HARule are the
	// parameters of their operations.
	Resize   *ResizeOp   `json:"resize,omitempty"`
	Migrate  *MigrateOp  `json:"migrate,omitempty"`
	Pool     *PoolOp     `json:"pool,omitempty"`
	Snapshot *SnapshotOp `json:"snapshot,omitempty"`
	HAState  string      `json:"ha_state,omitempty"`
	HARule   *HARuleOp   `json:"ha_rule,omitempty"`
	// Digest is the config digest the plan saw; Proxmox refuses the write
	// if the config changed since.
	Digest string `json:"digest,omitempty"`
	// Timeout bounds a graceful shutdown before it is forced.
	Timeout time.Duration `json:"timeout_ns,omitempty"`
	Reason  string        `json:"reason"`
	// DesiredSeq and BasisSeq are the stream sequences of the desired event
	// and the observation this action was planned from; executors skip the
	// action if either has been superseded.
	DesiredSeq uint64 `json:"desired_seq"`
	BasisSeq   uint64 `json:"basis_seq"`
	// ObservationSeq is the entry (an observation, or a result's
	// read-back) whose reading of the guest the plan used; BasisSeq may be
	// a later observation the fold did not adopt. Executors re-plan from
	// it to verify the action (0 in actions of older planners: BasisSeq).
	ObservationSeq uint64 `json:"observation_seq,omitempty"`
	// FoldSeq is the journal sequence the planner had folded when it
	// planned the action: operators' requests journalled after it (a
	// pause, a release) were not seen by the plan, and executors honour
	// them before acting (0 in actions of older planners).
	FoldSeq uint64 `json:"fold_seq,omitempty"`
	Attempt int    `json:"attempt"`
}

// CloneOp is a planned clone: template From on FromNode into the action's
// vmid, on the action's node.
type CloneOp struct {
	From     int    `json:"from"`
	FromNode string `json:"from_node"`
	Full     bool   `json:"full"`
	Storage  string `json:"storage,omitempty"`
	Pool     string `json:"pool,omitempty"`
	Name     string `json:"name,omitempty"`
	// SourceStorage is the template's storage, where a full clone without
	// Storage allocates and a linked clone is made (its storage slot); ""
	// when not observed (and, before issue 42, on linked clones).
	SourceStorage string `json:"source_storage,omitempty"`
}

// OwnerTag marks the guests converge created: it clones onto a vmid only
// when it is free or carries the mark (or the clone's description), and
// keeps the tag whatever tags the desired state asks for.
const OwnerTag = "converge-owned"

// CloneDescription is the description a clone starts with: it names the
// action, so that an executor that lost track of its clone recognises the
// guest as its own (the first config write replaces it with the desired
// description and adds OwnerTag).
func CloneDescription(from int, actionID string) string {
	return fmt.Sprintf("Created by converge from template %d (action %s).", from, actionID)
}

// clonePrefix starts every CloneDescription.
const clonePrefix = "Created by converge from template "

// Owned reports whether converge created the observed guest: it carries
// OwnerTag, or still the description its clone started with.
func (o *Observed) Owned() bool {
	for _, t := range o.Config.Tags {
		if strings.EqualFold(t, OwnerTag) {
			return true
		}
	}
	return strings.HasPrefix(o.Config.Description, clonePrefix)
}

// ResultStatus is what happened to an action.
type ResultStatus string

// Result statuses. Started is journalled with the Proxmox task id before the
// executor waits; the others are final.
const (
	ResultStarted   ResultStatus = "started"
	ResultSucceeded ResultStatus = "succeeded"
	ResultFailed    ResultStatus = "failed"
	ResultSkipped   ResultStatus = "skipped"
)

// Final reports whether no further result follows for the action.
func (s ResultStatus) Final() bool { return s != ResultStarted }

// Result is an executor's journal entry for an action.
type Result struct {
	Meta
	ActionID string       `json:"action_id"`
	VMID     int          `json:"vmid"`
	Cluster  string       `json:"cluster"`
	Op       Op           `json:"op"`
	Status   ResultStatus `json:"status"`
	UPID     string       `json:"upid,omitempty"`
	Node     string       `json:"node,omitempty"`
	// Error is the failure as Proxmox or the executor told it; ErrorClass
	// what it means for what comes next.
	Error      string     `json:"error,omitempty"`
	ErrorClass ErrorClass `json:"error_class,omitempty"`
	Warnings   int        `json:"warnings,omitempty"`
	TaskLog    []string   `json:"task_log,omitempty"`
	// Reason says why an action was skipped or already done.
	Reason   string    `json:"reason,omitempty"`
	Observed *Observed `json:"observed,omitempty"`
	Executor string    `json:"executor,omitempty"`
}

// Control commands.
const (
	// CommandResync asks for a full reconciliation pass now.
	CommandResync = "resync"
	// CommandPause stops acting on the named guests (or all) until
	// CommandResume; they are still observed and planned (dry), and
	// show status paused.
	CommandPause  = "pause"
	CommandResume = "resume"
	// CommandApprove releases the disruptive actions the mass-change
	// guard holds for the named guests (or all): those planned from a
	// desired revision journalled before the approval, and, with All, the
	// hold an inventory loss put on everything.
	CommandApprove = "approve"
	// CommandRelease hands the named guests back: their desired state is
	// forgotten and converge leaves them alone until a new one arrives.
	CommandRelease = "release"
)

// Control is a request to converge's roles, journalled on the cluster's
// control subject. Who asked is Meta.Publisher.
type Control struct {
	Meta
	Command string `json:"command"`
	// VMIDs are the guests a per-guest command names; All names every
	// guest (not for release).
	VMIDs []int `json:"vmids,omitempty"`
	All   bool  `json:"all,omitempty"`
	// Reason is the operator's word on why (optional): shown in history
	// and the console's timeline, never acted on.
	Reason string `json:"reason,omitempty"`
}

// maxControlVMIDs bounds one request: a longer list is several requests.
const maxControlVMIDs = 10000

// MaxControlReason bounds a request's reason in bytes: a sentence or two,
// not a document.
const MaxControlReason = 1024

// Validate checks a control request before it is published and when it
// is folded: an invalid one changes nothing.
func (c *Control) Validate() error {
	switch c.Command {
	case CommandResync:
		return checkReason(c.Command, c.Reason)
	case CommandPause, CommandResume, CommandApprove, CommandRelease:
	default:
		return fmt.Errorf("unknown control command %q", c.Command)
	}
	switch {
	case c.All && c.Command == CommandRelease:
		return fmt.Errorf("release names guests one by one: --all is not accepted")
	case c.All && len(c.VMIDs) > 0:
		return fmt.Errorf("%s: give guests or all, not both", c.Command)
	case !c.All && len(c.VMIDs) == 0:
		return fmt.Errorf("%s: name at least one guest (or all)", c.Command)
	case len(c.VMIDs) > maxControlVMIDs:
		return fmt.Errorf("%s: at most %d guests per request, got %d", c.Command, maxControlVMIDs, len(c.VMIDs))
	}
	for _, id := range c.VMIDs {
		if id < MinVMID || id > MaxVMID {
			return fmt.Errorf("%s: vmid %d is not within %d..%d", c.Command, id, MinVMID, MaxVMID)
		}
	}
	return checkReason(c.Command, c.Reason)
}

// checkReason refuses a reason a one-line audit trail cannot show as
// given: too long, not UTF-8, or with a character that is not graphic
// text or a space: controls (a newline would forge a line of `converge
// history`, an escape sequence a terminal's), format characters (U+202E
// reverses what a log or page shows after it; zero-width ones hide text)
// and line or paragraph separators.
func checkReason(command, r string) error {
	switch {
	case len(r) > MaxControlReason:
		return fmt.Errorf("%s: reason: at most %d bytes, got %d", command, MaxControlReason, len(r))
	case !utf8.ValidString(r):
		return fmt.Errorf("%s: reason: not valid UTF-8", command)
	}
	for i, c := range r {
		if !unicode.IsGraphic(c) {
			return fmt.Errorf("%s: reason: character %U at byte %d is not text (one line of text: no newlines, tabs, control or format characters)", command, c, i)
		}
	}
	return nil
}
