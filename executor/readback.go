package executor

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/pve"
)

// Fewer Proxmox calls per action (issue 23): every call is load on
// pveproxy's few workers. Where the outcome of a successful action is
// known from the action and its verified basis, the read-back is derived
// instead of read:
//
//   - a config write Proxmox completed synchronously (a PUT, or a POST
//     done within background_delay) of keys it applies at once (cores and
//     memory only to a guest whose status, read after the write, is
//     stopped): the
//     basis's config with the written values, normalised as a read-back
//     would be; the digest is then unknown ("");
//   - a start, stop or shutdown of a guest with nothing converge manages
//     pending: the guest's status is read (the power state is the truth
//     that matters), its managed config is the basis's, its digest
//     unknown (other pending keys may have been applied).
//
// A derived observation carries AfterSeq, the newest journal sequence the
// executor had read before acting. It is derived only if no observation
// of the guest was journalled after that (raced): an observer's read of a
// change made meanwhile has the guest read back instead. The projector
// adopts it as it adopts a read read-back, over an observation journalled
// between that check and the result (read while the action ran, maybe
// before its outcome: the planner would repeat the action). The next
// config write of a guest whose digest is unknown reads the config first
// (digestCheck): the write stays fenced by Proxmox's digest.

// fastKeys are the keys qemu-server applies at once even to a running VM
// ($fast_plug_option: name, description, tags, onboot…); pve-container
// too, but for the hostname, which a running container takes through its
// pending changes.
func fastKey(kind events.GuestKind, k string) bool {
	switch k {
	case "description", "tags", "onboot":
		return true
	case "name":
		return kind == events.QEMU
	}
	return false
}

// coldKeys are the further keys a stopped guest takes at once.
func coldKey(k string) bool { return k == "name" || k == "cores" || k == "memory" }

// derivedConfig is the observation after a synchronous config write, nil
// when it cannot be derived (then the guest is read back). cold reports
// that it counts on the guest being stopped (cores, memory, a container's
// hostname): the basis may be older than a start by hand, after which
// Proxmox keeps those values pending, so the caller reads the status
// first and uses the derivation only if the guest is stopped.
func (j *job) derivedConfig(r *events.Result) (o *events.Observed, cold bool) {
	a, b := j.a, j.basis
	if a.Op != events.OpSetConfig || r.Status != events.ResultSucceeded || r.UPID != "" || r.ErrorClass != "" ||
		b == nil || !b.Exists || b.Lock != "" || len(b.Pending) > 0 || len(a.Revert) > 0 || len(a.Set)+len(a.Delete) == 0 {
		return nil, false
	}
	c := b.Config
	c.Tags = append([]string(nil), c.Tags...)
	apply := func(k, v string) bool {
		if !fastKey(a.Kind, k) {
			if b.Status != "stopped" || !coldKey(k) {
				return false
			}
			cold = true
		}
		return applyKey(&c, k, v)
	}
	for k, v := range a.Set {
		if v == "" || !apply(k, v) {
			return nil, false // a deletion reads as Proxmox's default: read it
		}
	}
	if len(a.Delete) > 0 {
		return nil, false
	}
	o = j.derivedMeta(b)
	o.Config, o.Digest = c, "" // c shares the basis's maps, as the planner's copy does
	return o, cold
}

// applyKey sets a managed key's value (PVE's name and form, as written or
// as an observation's Pending lists it) in c; false for a key or value it
// cannot derive (then the guest is read back).
func applyKey(c *events.GuestConfig, k, v string) bool {
	switch k {
	case "name":
		c.Name = v
	case "description":
		c.Description = events.NormaliseDescription(v)
	case "tags":
		c.Tags = events.NormaliseTags(events.ParseTags(v))
	case "onboot":
		c.OnBoot = v == "1"
	case "cores":
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return false
		}
		c.Cores = n
	case "memory":
		mib, err := pve.ParseMemoryMiB(v)
		if err != nil {
			return false
		}
		c.MemoryMiB = mib
	default:
		return false
	}
	return true
}

// configReadBack is derivedConfig checked against the guest's status when
// it counts on the guest being stopped: nil to read the guest back.
func (j *job) configReadBack(ctx context.Context, r *events.Result) *events.Observed {
	o, cold := j.derivedConfig(r)
	if o == nil || j.raced(ctx) {
		return nil
	}
	if cold {
		st, err := j.e.px.GuestStatus(ctx, j.ref)
		if err != nil || st.Status != "stopped" || st.Lock != "" {
			return nil
		}
	}
	return o
}

// raced reports whether an observation of the guest was journalled after
// what the executor had read before acting (or the journal cannot say):
// its reading may be newer than the basis a derived read-back takes its
// config from, and the projector adopts the read-back over it. The guest
// is then read back instead. One direct get on the journal, no Proxmox
// call: the guest's first observation after knownSeq, which is usually
// none (an answer without a body; the guest's newest observation, which
// the same question could be put to, comes with its whole config).
func (j *job) raced(ctx context.Context) bool {
	o, err := j.e.j.Next(ctx, events.KindObserved, j.e.cfg.Cluster, j.a.VMID, j.knownSeq+1)
	return err != nil || o != nil
}

// derivedPower is the observation after a successful start, stop or
// shutdown task of a guest with nothing pending, or a start or reboot of
// one whose pending values converge derives (applyKey): a boot applies
// every pending change (qemu-server and pve-container apply the pending
// section at start; a reboot is a stop and a start). Status as read,
// config from the basis with its pending values applied. nil when it
// cannot be derived. (A fleet change's next reboot on a node waits for
// this result: one read instead of two.)
func (j *job) derivedPower(ctx context.Context, r *events.Result) (*events.Observed, error) {
	a, b := j.a, j.basis
	boots := false
	switch a.Op {
	case events.OpStart, events.OpReboot:
		boots = true
	case events.OpStop, events.OpShutdown:
	default:
		return nil, nil
	}
	// Pending values apply only if the guest booted: not after "already
	// running" (ErrorClass already-done), nor at a stop.
	if r.Status != events.ResultSucceeded || b == nil || !b.Exists || len(b.Pending) > 0 && (!boots || r.ErrorClass != "") ||
		b.Lock != "" || b.Node != j.ref.Node {
		return nil, nil
	}
	if a.Op == events.OpReboot && len(b.Pending) == 0 {
		return nil, nil // a reboot for nothing pending: read what it did
	}
	cfg := b.Config
	if len(b.Pending) > 0 {
		cfg.Tags = slices.Clone(cfg.Tags)
		for k, v := range b.Pending {
			if v == "" || !applyKey(&cfg, k, v) {
				return nil, nil
			}
		}
	}
	if j.raced(ctx) {
		return nil, nil
	}
	st, err := j.e.px.GuestStatus(ctx, j.ref)
	if err != nil {
		return nil, err
	}
	if boots && st.Status != "running" {
		return nil, nil // booted and stopped again since: read it
	}
	o := j.derivedFrom(b)
	o.Config.Name, o.Config.Description, o.Config.Tags, o.Config.OnBoot = cfg.Name, cfg.Description, cfg.Tags, cfg.OnBoot
	o.Config.Cores, o.Config.MemoryMiB = cfg.Cores, cfg.MemoryMiB
	// Starting and stopping apply pending changes of keys converge does
	// not manage (and a start regenerates cloud-init): the config file
	// may have been rewritten, so its digest is not known. The next write
	// reads it (digestCheck).
	o.Status, o.Digest = st.Status, ""
	if st.Lock != "" {
		return nil, nil // a lock taken meanwhile rewrote the config: read it
	}
	return o, nil
}

// derivedFrom starts a derived observation from the basis, with copies
// of its config's maps.
func (j *job) derivedFrom(b *events.Observed) *events.Observed {
	o := j.derivedMeta(b)
	if o.Config.Disks != nil {
		o.Config.Disks = maps.Clone(o.Config.Disks)
	}
	o.Config.Net, o.Config.CloudInit = maps.Clone(o.Config.Net), maps.Clone(o.Config.CloudInit)
	return o
}

// derivedMeta is derivedFrom without the copies, for a caller that
// replaces the config.
func (j *job) derivedMeta(b *events.Observed) *events.Observed {
	now := j.e.clk.Now()
	o := *b
	o.Meta = events.NewMeta(j.e.cfg.Name, j.a.CorrelationID, now)
	o.ReadAt = now.UTC()
	o.Source = events.SourceExecutor
	o.Pending = nil
	o.AfterSeq = j.knownSeq
	return &o
}

// digestCheck runs before a config write planned from a derived read-back
// (digest unknown): the config is read, and the write goes ahead with its
// digest only if what converge manages is still what the plan saw;
// otherwise the action is skipped and the read-back makes the planner
// re-plan.
func (j *job) digestCheck(ctx context.Context) (outcome, bool) {
	cfg, err := j.e.px.GuestConfig(ctx, j.ref)
	switch {
	case ctx.Err() != nil:
		return abandon, true
	case err != nil:
		return j.finish(ctx, j.failed(err, pve.Classify(err))), true
	}
	if b := j.basis; b != nil {
		if why := configMoved(b, cfg); why != "" {
			r := j.result(events.ResultSkipped)
			r.Reason = events.TruncateReason("superseded: the guest's " + why + " changed since the plan")
			return j.finish(ctx, r), true
		}
	}
	j.digest = cfg.Digest
	return abandon, false
}

// configMoved names what converge manages that differs between the basis
// and a fresh config read, "" when nothing does.
func configMoved(b *events.Observed, cfg *pve.GuestConfig) string {
	now := cfg.Managed()
	var moved []string
	if !maps.Equal(b.Pending, cfg.ManagedPending()) {
		moved = append(moved, "pending changes")
	}
	if cfg.Lock != "" {
		moved = append(moved, "lock")
	}
	if !sameConfig(b.Config, now) {
		moved = append(moved, "config")
	}
	return strings.Join(moved, ", ")
}

// sameConfig compares what converge manages of two configs (nil and empty
// alike).
func sameConfig(a, b events.GuestConfig) bool {
	return a.Name == b.Name && a.Description == b.Description && a.Cores == b.Cores && a.MemoryMiB == b.MemoryMiB &&
		a.OnBoot == b.OnBoot && a.Hotplug == b.Hotplug && a.NUMA == b.NUMA && slices.Equal(a.Tags, b.Tags) &&
		maps.Equal(a.Disks, b.Disks) && maps.Equal(a.Net, b.Net) && maps.Equal(a.CloudInit, b.CloudInit)
}
