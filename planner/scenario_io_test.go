package planner_test

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/converge-pve/converge/events"
)

// What scenarios put into the engine (observations) and how they print
// what it hands out.

// observation builds an observed guest from key=value settings: status,
// node, kind, lock, cores, memory, name, description, tags, onboot,
// digest, pending.KEY, disk.KEY=VOLUME[,GIB[,cdrom]], net.KEY=VALUE (as
// Proxmox prints it), ci.KEY=VALUE (a cloud-init key, normalised),
// hotplug, numa, ha, pool, exists, read_at (a duration from now), after
// (AfterSeq: the journal's last sequence the reader knew before reading).
func (h *harness) observation(vmid int, kv []string) (*events.Observed, error) {
	o := &events.Observed{Meta: events.NewMeta("observer@test", "", h.now), VMID: vmid, Cluster: "pve", Exists: true,
		Node: "pve1", Kind: events.QEMU, Status: "stopped", Digest: "d0", ReadAt: h.now, Source: events.SourceObserver,
		Config: events.GuestConfig{Name: "vm" + strconv.Itoa(vmid), Cores: 1, MemoryMiB: 512, Tags: []string{}}}
	for _, a := range kv {
		k, v, _ := strings.Cut(a, "=")
		var err error
		switch {
		case k == "status":
			o.Status = v
		case k == "node":
			o.Node = v
		case k == "kind":
			o.Kind = events.GuestKind(v)
		case k == "lock":
			o.Lock = v
		case k == "digest":
			o.Digest = v
		case k == "exists":
			o.Exists = v != "false"
		case k == "template":
			o.Template = v != "false"
		case k == "protected":
			o.Protected = v != "false"
		case k == "ha":
			// Under HA groups unless a key below says otherwise.
			o.HA = v
			if v != "" && o.HAPlacement == nil {
				o.HAPlacement = &events.HAPlacement{Groups: true}
			}
		case k == "ha_unknown":
			// The observer could not read how HA places guests.
			o.HAPlacement = nil
		case k == "pool":
			o.Pool = v
		case k == "ha_rules":
			// HA rules in force: the guest's placement (ha_rule=NAME
			// ha_nodes=N1,N2 ha_strict=1 ha_via=SID ha_inactive=WHY
			// ha_nofailback fill it in).
			o.HAPlacement = &events.HAPlacement{}
		case k == "ha_rule":
			o.HAPlacement = placementOf(o)
			o.HAPlacement.Rule = v
		case k == "ha_nodes":
			o.HAPlacement = placementOf(o)
			o.HAPlacement.Nodes = strings.Split(v, ",")
		case k == "ha_strict":
			o.HAPlacement = placementOf(o)
			o.HAPlacement.Strict = v == "1"
		case k == "ha_via":
			o.HAPlacement = placementOf(o)
			o.HAPlacement.Via = v
		case k == "ha_inactive":
			o.HAPlacement = placementOf(o)
			o.HAPlacement.Inactive = v
		case k == "ha_nofailback":
			o.HAPlacement = placementOf(o)
			o.HAPlacement.NoFailback = true
		case k == "hotplug":
			o.Config.Hotplug = v
		case k == "numa":
			o.Config.NUMA = v == "1"
		case k == "cores":
			o.Config.Cores, err = strconv.Atoi(v)
		case k == "memory":
			o.Config.MemoryMiB, err = strconv.Atoi(v)
		case k == "name":
			o.Config.Name = v
		case k == "description":
			o.Config.Description = v
		case k == "tags":
			o.Config.Tags = events.ParseTags(v)
		case k == "onboot":
			o.Config.OnBoot = v == "1"
		case strings.HasPrefix(k, "disk."):
			// disk.KEY=VOLUME[,GIB[,MEDIA]]
			vol, size, _ := strings.Cut(v, ",")
			size, media, _ := strings.Cut(size, ",")
			var gib int64
			if size != "" {
				gib, err = strconv.ParseInt(size, 10, 64)
			}
			if o.Config.Disks == nil {
				o.Config.Disks = map[string]events.Disk{}
			}
			o.Config.Disks[strings.TrimPrefix(k, "disk.")] = events.Disk{Volume: vol, SizeBytes: gib * events.GiB, Media: media}
		case strings.HasPrefix(k, "net."):
			if o.Config.Net == nil {
				o.Config.Net = map[string]string{}
			}
			o.Config.Net[strings.TrimPrefix(k, "net.")] = v
		case strings.HasPrefix(k, "ci."):
			if o.Config.CloudInit == nil {
				o.Config.CloudInit = map[string]string{}
			}
			o.Config.CloudInit[strings.TrimPrefix(k, "ci.")] = v
		case strings.HasPrefix(k, "pending."):
			if o.Pending == nil {
				o.Pending = map[string]string{}
			}
			o.Pending[strings.TrimPrefix(k, "pending.")] = v
		case k == "read_at":
			var d time.Duration
			d, err = time.ParseDuration(v)
			o.ReadAt = h.now.Add(d)
		case k == "after":
			// The journal's last sequence the reader knew before reading
			// (an observer's pass; a derived read-back's basis).
			o.AfterSeq, err = strconv.ParseUint(v, 10, 64)
		default:
			return nil, fmt.Errorf("unknown observation key %q", k)
		}
		if err != nil {
			return nil, err
		}
	}
	return o, nil
}

// placementOf is o's HA placement under rules, made when it has none.
func placementOf(o *events.Observed) *events.HAPlacement {
	if o.HAPlacement == nil || o.HAPlacement.Groups {
		return &events.HAPlacement{}
	}
	return o.HAPlacement
}

// ready prints the engine's Ready: one line per action handed out (kept in
// the outbox until published or refused), the documents of a flush with
// each guest's state, and the rest.
func (h *harness) ready() string {
	r := h.e.Ready()
	var b strings.Builder
	if r.CaughtUp {
		b.WriteString("caught up\n")
	}
	if r.Resync {
		b.WriteString("resync: full pass\n")
	}
	for _, u := range r.Unfolded {
		fmt.Fprintf(&b, "unfolded %d: %v\n", u.Seq, u.Err)
	}
	if r.Acquired > 0 {
		fmt.Fprintf(&b, "acquired %d guests\n", r.Acquired)
	}
	for _, p := range r.Actions {
		a := p.Action
		fmt.Fprintf(&b, "action %d %s id=%s fence=%d desired=%d basis=%d attempt=%d", a.VMID, a.Op, a.ID, p.ExpectLastSeq,
			a.DesiredSeq, a.BasisSeq, a.Attempt)
		keys := make([]string, 0, len(a.Set))
		for k := range a.Set {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, " %s=%s", k, a.Set[k])
		}
		for _, k := range a.Delete {
			fmt.Fprintf(&b, " -%s", k)
		}
		for _, k := range a.Revert {
			fmt.Fprintf(&b, " revert=%s", k)
		}
		if r := a.Resize; r != nil {
			fmt.Fprintf(&b, " disk=%s size=%d", r.Disk, r.SizeGiB)
		}
		if m := a.Migrate; m != nil {
			fmt.Fprintf(&b, " from=%s target=%s online=%t restart=%t ha=%t", a.Node, m.Target, m.Online, m.Restart, m.HA)
		}
		if p := a.Pool; p != nil {
			fmt.Fprintf(&b, " pool=%q->%q create=%t", p.From, p.To, p.Create)
		}
		if s := a.Snapshot; s != nil {
			fmt.Fprintf(&b, " snapshot=%s before=%s keep=%d", s.Name, s.Before, s.Keep)
		}
		if a.HAState != "" {
			fmt.Fprintf(&b, " ha_state=%s", a.HAState)
		}
		if r := a.HARule; r != nil {
			fmt.Fprintf(&b, " ha_rule=%s nodes=%s create=%t", r.Rule, strings.Join(r.Nodes, ","), r.Create)
		}
		if c := a.Clone; c != nil {
			fmt.Fprintf(&b, " from=%d@%s full=%t storage=%s pool=%s name=%s onto=%s kind=%s", c.From, c.FromNode, c.Full, c.Storage, c.Pool, c.Name, a.Node, a.Kind)
		}
		fmt.Fprintf(&b, ": %s\n", a.Reason)
		if len(p.Claims) > 0 {
			fmt.Fprintf(&b, "claims %d", a.VMID)
			for _, c := range p.Claims {
				fmt.Fprintf(&b, " %s/%d", c.Key, c.Limit)
			}
			b.WriteString("\n")
		}
		h.outbox = append(h.outbox, p)
	}
	h.keepDocs(r.Flush)
	if f := r.Flush; f != nil && len(f.Docs) > 0 {
		b.WriteString("docs")
		for _, d := range f.Docs {
			fmt.Fprintf(&b, " %d=%s", d.View.VMID, d.Decision.Status.Kind)
		}
		fmt.Fprintf(&b, " (seq %d)\n", f.Seq)
	}
	if r.Checkpoint != nil {
		fmt.Fprintf(&b, "checkpoint seq=%d guests=%d\n", r.Checkpoint.Seq, len(r.Checkpoint.Views))
		h.snapshot = r.Checkpoint
	}
	for _, n := range r.Held {
		fmt.Fprintf(&b, "held %d: %s\n", n.VMID, n.Reason)
	}
	for _, c := range r.Converged {
		fmt.Fprintf(&b, "converged %d desired=%d took=%s\n", c.VMID, c.DesiredSeq, c.Took)
	}
	return b.String()
}
