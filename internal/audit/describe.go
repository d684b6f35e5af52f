package audit

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/converge-pve/converge/events"
)

// How entries describe events and observations, in one line each.

// DescribeDesired lists a desired state's managed fields in one line.
func DescribeDesired(d *events.Desired) string {
	if d == nil {
		return "-"
	}
	var p []string
	if d.Absent {
		p = append(p, "absent")
	}
	if d.Kind != nil {
		p = append(p, "kind="+string(*d.Kind))
	}
	if d.Power != nil {
		p = append(p, "power="+string(*d.Power))
	}
	if d.Cores != nil {
		p = append(p, "cores="+strconv.Itoa(*d.Cores))
	}
	if d.MemoryMiB != nil {
		p = append(p, "memory_mib="+strconv.Itoa(*d.MemoryMiB))
	}
	if d.Name != nil {
		p = append(p, "name="+*d.Name)
	}
	if d.Description != nil {
		p = append(p, "description="+short(*d.Description))
	}
	if d.Tags != nil {
		p = append(p, "tags="+strings.Join(*d.Tags, ","))
	}
	if d.OnBoot != nil {
		p = append(p, "onboot="+strconv.FormatBool(*d.OnBoot))
	}
	if d.Clone != nil {
		p = append(p, "clone.from="+strconv.Itoa(d.Clone.From))
	}
	if d.Restart != nil {
		p = append(p, "restart="+string(*d.Restart))
	}
	p = append(p, describeWhole(d)...)
	if len(p) == 0 {
		return "nothing managed"
	}
	return strings.Join(p, " ")
}

func describeAction(a *events.Action) string {
	if a.Op == events.OpHold {
		return fmt.Sprintf("held %s: %s (desired rev %d; converge approve %d releases it)", a.Holds, a.Reason, a.DesiredSeq, a.VMID)
	}
	var b strings.Builder
	b.WriteString(string(a.Op))
	if len(a.Set) > 0 {
		keys := slices.Sorted(maps.Keys(a.Set))
		for i, k := range keys {
			keys[i] = k + "=" + short(a.Set[k])
		}
		b.WriteString(" " + strings.Join(keys, " "))
	}
	if len(a.Delete) > 0 {
		b.WriteString(" delete=" + strings.Join(a.Delete, ","))
	}
	switch {
	case a.Resize != nil:
		fmt.Fprintf(&b, " %s to %d GiB", a.Resize.Disk, a.Resize.SizeGiB)
	case a.Migrate != nil:
		b.WriteString(" to " + a.Migrate.Target)
	case a.Pool != nil:
		fmt.Fprintf(&b, " from %q to %q", a.Pool.From, a.Pool.To)
	case a.Snapshot != nil:
		fmt.Fprintf(&b, " %s before %s", a.Snapshot.Name, a.Snapshot.Before)
	case a.HAState != "":
		b.WriteString(" " + a.HAState)
	}
	fmt.Fprintf(&b, " on %s: %s (action %s, desired rev %d, attempt %d)", a.Node, a.Reason, a.ID, a.DesiredSeq, a.Attempt)
	return b.String()
}

func describeResult(r *events.Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Op, r.Status)
	if r.Node != "" {
		b.WriteString(" on " + r.Node)
	}
	if r.Error != "" {
		fmt.Fprintf(&b, ": %s", r.Error)
		if r.ErrorClass != "" {
			fmt.Fprintf(&b, " [%s]", r.ErrorClass)
		}
	}
	if r.Reason != "" {
		b.WriteString(" (" + r.Reason + ")")
	}
	if r.Warnings > 0 {
		fmt.Fprintf(&b, " with %d warning(s)", r.Warnings)
	}
	if len(r.TaskLog) > 0 {
		b.WriteString("; task log: " + strings.Join(r.TaskLog, " | "))
	}
	fmt.Fprintf(&b, " (action %s)", r.ActionID)
	return b.String()
}

func short(s string) string {
	if len(s) > 40 {
		s = s[:37] + "..."
	}
	return strconv.Quote(s)
}

// obsState is the part of an observation whose change matters to an
// operator, normalised as the planner compares it (events' normalisers): the
// digest, read time and publisher are left out.
type obsState struct {
	exists            bool
	node, kind        string
	status, lock      string
	template          bool
	name, description string
	tags              string
	cores, memory     int
	onboot            bool
	pending           string
}

func normalise(o *events.Observed) *obsState {
	st := &obsState{exists: o.Exists, node: o.Node, kind: string(o.Kind), status: o.Status, lock: o.Lock, template: o.Template,
		name: o.Config.Name, description: events.NormaliseDescription(o.Config.Description),
		tags: events.FormatTags(o.Config.Tags), cores: o.Config.Cores, memory: o.Config.MemoryMiB, onboot: o.Config.OnBoot}
	if len(o.Pending) > 0 {
		keys := slices.Sorted(maps.Keys(o.Pending))
		for i, k := range keys {
			keys[i] = k + "=" + o.Pending[k]
		}
		st.pending = strings.Join(keys, " ")
	}
	return st
}

func (s *obsState) describe() string {
	if !s.exists {
		return "does not exist"
	}
	d := fmt.Sprintf("%s on %s, %s, %d cores, %d MiB", s.kind, s.node, s.status, s.cores, s.memory)
	if s.lock != "" {
		d += ", locked (" + s.lock + ")"
	}
	if s.template {
		d += ", template"
	}
	if s.pending != "" {
		d += ", pending " + s.pending
	}
	return d
}

// diff lists what changed from s to n, one "field: old → new" each.
func (s *obsState) diff(n *obsState) []string {
	var out []string
	add := func(field, a, b string) {
		if a != b {
			out = append(out, field+": "+a+" → "+b)
		}
	}
	if s.exists != n.exists {
		if n.exists {
			return []string{"appeared: " + n.describe()}
		}
		return []string{"gone: the guest no longer exists"}
	}
	none := func(v string) string {
		if v == "" {
			return "none"
		}
		return v
	}
	add("node", s.node, n.node)
	add("kind", s.kind, n.kind)
	add("status", s.status, n.status)
	add("lock", none(s.lock), none(n.lock))
	add("template", strconv.FormatBool(s.template), strconv.FormatBool(n.template))
	add("name", strconv.Quote(s.name), strconv.Quote(n.name))
	add("description", short(s.description), short(n.description))
	add("tags", strconv.Quote(s.tags), strconv.Quote(n.tags))
	add("cores", strconv.Itoa(s.cores), strconv.Itoa(n.cores))
	add("memory_mib", strconv.Itoa(s.memory), strconv.Itoa(n.memory))
	add("onboot", strconv.FormatBool(s.onboot), strconv.FormatBool(n.onboot))
	add("pending", none(s.pending), none(n.pending))
	if s.description != n.description && short(s.description) == short(n.description) {
		out = append(out, "description: changed beyond its first 37 characters")
	}
	return out
}

// describeControl says what an operator asked for the guest, and why
// when they said (quoted: a journalled reason is anyone's text).
func describeControl(c *events.Control) string {
	// A request the planner refuses to fold (one published past the CLI
	// and the API, or by another client) changed nothing: say so rather
	// than what it asked for.
	if err := c.Validate(); err != nil {
		return "ignored " + strconv.Quote(c.Command) + " request: " + strconv.Quote(err.Error())
	}
	if c.Reason == "" {
		return describeCommand(c)
	}
	return describeCommand(c) + "; reason: " + strconv.Quote(c.Reason)
}

func describeCommand(c *events.Control) string {
	scope := "this guest"
	if c.All {
		scope = "all guests"
	}
	switch c.Command {
	case events.CommandPause:
		return "paused (" + scope + "): converge does not act until resumed"
	case events.CommandResume:
		return "resumed (" + scope + ")"
	case events.CommandApprove:
		return "approved (" + scope + "): held shutdowns, stops, reboots, migrations and destroys may proceed"
	case events.CommandRelease:
		return "released: converge leaves the guest alone until a new desired state arrives"
	}
	return c.Command
}

// describeWhole lists the whole-guest fields: node, disks, interfaces,
// cloud-init keys, pool and protective snapshots.
func describeWhole(d *events.Desired) []string {
	var p []string
	if d.Node != nil {
		p = append(p, "node="+*d.Node)
	}
	for _, k := range slices.Sorted(maps.Keys(d.Disks)) {
		w := d.Disks[k]
		s := fmt.Sprintf("disks.%s=%dG", k, w.SizeGiB)
		if w.Storage != "" {
			s += "@" + w.Storage
		}
		p = append(p, s)
	}
	for _, k := range slices.Sorted(maps.Keys(d.Net)) {
		n := d.Net[k]
		var f []string
		for _, kv := range [][2]string{{"model", n.Model}, {"bridge", n.Bridge}, {"name", n.Name}, {"ip", n.IP}, {"gw", n.GW}} {
			if kv[1] != "" {
				f = append(f, kv[0]+"="+kv[1])
			}
		}
		if n.Tag != nil {
			f = append(f, "tag="+strconv.Itoa(*n.Tag))
		}
		if n.Firewall != nil {
			f = append(f, "firewall="+strconv.FormatBool(*n.Firewall))
		}
		if n.Rate != nil {
			f = append(f, "rate="+strconv.FormatFloat(*n.Rate, 'f', -1, 64))
		}
		if n.MTU != nil {
			f = append(f, "mtu="+strconv.Itoa(*n.MTU))
		}
		p = append(p, "net."+k+"="+strings.Join(f, ","))
	}
	if c := d.CloudInit; c != nil {
		var f []string
		if c.User != nil {
			f = append(f, "user="+*c.User)
		}
		if c.SSHKeys != nil {
			f = append(f, fmt.Sprintf("ssh_keys=%d", len(*c.SSHKeys)))
		}
		for _, k := range slices.Sorted(maps.Keys(c.IPConfig)) {
			f = append(f, k+"="+c.IPConfig[k])
		}
		if c.Nameserver != nil {
			f = append(f, "nameserver="+*c.Nameserver)
		}
		if c.SearchDomain != nil {
			f = append(f, "searchdomain="+*c.SearchDomain)
		}
		if c.Custom != nil {
			f = append(f, "custom="+*c.Custom)
		}
		p = append(p, "cloudinit("+strings.Join(f, " ")+")")
	}
	if d.Pool != nil {
		p = append(p, "pool="+strconv.Quote(*d.Pool))
	}
	if len(d.SnapshotBefore) > 0 {
		p = append(p, "snapshot_before="+strings.Join(d.SnapshotBefore, ","))
	}
	return p
}
