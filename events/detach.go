package events

import "strings"

// goccy/go-json decodes strings (map keys and values too) as views into its
// own copy of the whole body, so keeping one string of an event keeps the
// event. Decode hands out values that share nothing with that copy: a
// planner that keeps each guest's last action, result and observation keeps
// their values, not their bodies (BenchmarkPlannerMemory, 100,000 guests).
type detacher interface{ detach() }

func own(s *string) {
	if *s != "" {
		*s = strings.Clone(*s)
	}
}

func ownAll(ss []string) {
	for i := range ss {
		own(&ss[i])
	}
}

func ownMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[strings.Clone(k)] = strings.Clone(v)
	}
	return out
}

func (m *Meta) detach() {
	own(&m.Publisher)
	own(&m.CorrelationID)
}

func (c *GuestConfig) detach() {
	own(&c.Name)
	own(&c.Description)
	ownAll(c.Tags)
	own(&c.Hotplug)
	if c.Disks != nil {
		disks := make(map[string]Disk, len(c.Disks))
		for k, d := range c.Disks {
			own(&d.Volume)
			own(&d.Media)
			disks[strings.Clone(k)] = d
		}
		c.Disks = disks
	}
	c.Net = ownMap(c.Net)
	c.CloudInit = ownMap(c.CloudInit)
}

func (o *Observed) detach() {
	o.Meta.detach()
	for _, s := range []*string{&o.Cluster, &o.Node, (*string)(&o.Kind), &o.Status, &o.Lock, &o.Digest, &o.HA, &o.Source} {
		own(s)
	}
	o.Config.detach()
	o.Pending = ownMap(o.Pending)
}

func (a *Action) detach() {
	a.Meta.detach()
	for _, s := range []*string{&a.ID, &a.Cluster, &a.Node, (*string)(&a.Kind), (*string)(&a.Op), (*string)(&a.Holds), &a.Digest, &a.Reason} {
		own(s)
	}
	if c := a.Clone; c != nil {
		for _, s := range []*string{&c.FromNode, &c.Storage, &c.Pool, &c.Name, &c.SourceStorage} {
			own(s)
		}
	}
	if r := a.Resize; r != nil {
		own(&r.Disk)
	}
	if m := a.Migrate; m != nil {
		own(&m.Target)
	}
	if p := a.Pool; p != nil {
		own(&p.From)
		own(&p.To)
	}
	if s := a.Snapshot; s != nil {
		own(&s.Name)
		own((*string)(&s.Before))
	}
	own(&a.HAState)
	a.Set = ownMap(a.Set)
	ownAll(a.Delete)
	ownAll(a.Revert)
}

func (r *Result) detach() {
	r.Meta.detach()
	for _, s := range []*string{&r.ActionID, &r.Cluster, (*string)(&r.Op), (*string)(&r.Status), &r.UPID, &r.Node,
		&r.Error, (*string)(&r.ErrorClass), &r.Reason, &r.Executor} {
		own(s)
	}
	ownAll(r.TaskLog)
	if r.Observed != nil {
		r.Observed.detach()
	}
}

func (h *Heartbeat) detach() {
	h.Meta.detach()
	own(&h.Cluster)
	own(&h.Observer)
	own(&h.Error)
}

func (c *Control) detach() {
	c.Meta.detach()
	own(&c.Command)
}
