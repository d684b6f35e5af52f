package planfile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
	"github.com/converge-pve/converge/projector"
)

// Entry is one desired state of a file: the vmid it names and its body as
// given (JSON).
type Entry struct {
	VMID int
	Body []byte
}

// Split reads a JSON document as desire -f does: one desired state, a
// list of them, or {"guests": [...]}.
func Split(js []byte) ([]Entry, error) {
	var raws []json.RawMessage
	var err error
	switch t := bytes.TrimSpace(js); {
	case len(t) > 0 && t[0] == '[':
		err = json.Unmarshal(t, &raws)
	case len(t) > 0 && t[0] == '{':
		var wrap struct {
			Guests []json.RawMessage `json:"guests"`
		}
		if json.Unmarshal(t, &wrap) == nil && wrap.Guests != nil {
			raws = wrap.Guests
		} else {
			raws = []json.RawMessage{t}
		}
	default:
		err = errors.New("want an object, a list, or {guests: [...]}")
	}
	if err != nil {
		return nil, err
	}
	if len(raws) == 0 {
		return nil, errors.New("no desired states")
	}
	out := make([]Entry, 0, len(raws))
	for _, r := range raws {
		var head struct {
			VMID int `json:"vmid"`
		}
		_ = json.Unmarshal(r, &head)
		out = append(out, Entry{head.VMID, r})
	}
	return out, nil
}

// Input is what a plan is made from.
type Input struct {
	Cluster string
	// Docs are the guest documents the planner wrote, Cluster its cluster
	// document (required: no planner, no plan).
	Docs       []views.GuestDoc
	ClusterDoc *views.ClusterDoc
	// Entries are the desired states to plan, in publishing order.
	Entries []Entry
	// Releases are guests the caller would release alongside (a set's
	// prune): planned as unmanaged, never destroyed.
	Releases []int
	// Override, if set, changes the published policy and limits; what it
	// changed is named in Result.Overridden.
	Override func(*planner.Policy, *planner.Limits) []string
	Now      time.Time
}

// Result is the plan of a file.
type Result struct {
	Cluster string `json:"cluster"`
	// Seq is the journal sequence the planner's views reflect.
	Seq uint64 `json:"views_seq"`
	// Planner names the planner whose policy and limits were used;
	// PolicySource and LimitsSource say whether it published them or the
	// defaults stood in.
	Planner      string         `json:"planner"`
	Policy       planner.Policy `json:"policy"`
	PolicySource string         `json:"policy_source"`
	Limits       planner.Limits `json:"limits"`
	LimitsSource string         `json:"limits_source"`
	Overridden   []string       `json:"overridden,omitempty"`
	Guests       []Guest        `json:"guests"`
	Releases     []Release      `json:"releases,omitempty"`
	// Changes is whether publishing the file would change anything: a
	// desired state differs, an action would run or wait, or a guest is
	// released.
	Changes bool `json:"changes"`
	// Actions counts the actions that would be handed out at once.
	Actions int `json:"actions"`
}

// Guest is one entry's plan.
type Guest struct {
	VMID int `json:"vmid"`
	// Desired: "new" (no desired state yet), "changed", "unchanged" or
	// "rejected" (the desired contract refuses it: Rejected says why).
	Desired  string              `json:"desired"`
	Changed  []string            `json:"changed,omitempty"`
	Rejected []events.FieldError `json:"rejected,omitempty"`
	// Status and Steps are the planner's decision; Steps[0] is the action
	// that would be handed out now (a hold, when the guard holds it), the
	// rest what follows it.
	Status planner.Status `json:"status"`
	Steps  []planner.Step `json:"steps,omitempty"`
	// Waits says what the guest would wait for: "guard" (held for
	// approval), "restart" (restart policy or window), "gate" (a destroy
	// behind its gate), "node" (a task slot), "" for nothing.
	Waits string `json:"waits,omitempty"`
	// Restart is set when a step restarts the guest.
	Restart bool `json:"restart,omitempty"`
}

// Release is a guest the caller would release.
type Release struct {
	VMID   int            `json:"vmid"`
	Status planner.Status `json:"status"`
}

// Plan plans in's file. It publishes nothing and changes none of in.
func Plan(in Input) (*Result, error) {
	cd := in.ClusterDoc
	if cd == nil {
		return nil, fmt.Errorf("no planner has written views for cluster %q yet", in.Cluster)
	}
	r := &Result{Cluster: in.Cluster, Seq: cd.Seq, Planner: cd.Planner,
		Policy: planner.DefaultPolicy(), PolicySource: "defaults (the planner did not publish its policy)",
		Limits: planner.DefaultLimits(), LimitsSource: "defaults (the planner did not publish its limits)"}
	if cd.Policy != nil {
		r.Policy, r.PolicySource = *cd.Policy, "published by planner "+cd.Planner
	}
	if cd.Limits != nil {
		r.Limits, r.LimitsSource = *cd.Limits, "published by planner "+cd.Planner
	}
	if in.Override != nil {
		r.Overridden = in.Override(&r.Policy, &r.Limits)
	}
	if err := r.Policy.Validate(); err != nil {
		return nil, err
	}
	if err := r.Limits.Validate(); err != nil {
		return nil, err
	}
	p, base, err := restore(in.Cluster, cd, in.Docs)
	if err != nil {
		return nil, err
	}
	g := newGuard(p, r.Limits, in.Now)
	hdr := events.Header{}
	hdr.Set(events.HeaderPublisher, "converge-plan")
	for _, id := range in.Releases {
		v := p.Views[id]
		if v == nil {
			continue
		}
		was := v.Desired != nil
		v.Desired, v.Released = nil, &projector.Mark{Seq: base + 1, By: "converge-plan", At: in.Now}
		g.managedNow(v, was)
		r.Releases = append(r.Releases, Release{id, planner.Plan(v, p.State, r.Policy, in.Now).Status})
		r.Changes = true
	}
	for i, e := range in.Entries {
		gp := Guest{VMID: e.VMID}
		d, err := events.DecodeDesired(e.Body, e.VMID)
		if err != nil {
			gp.Desired = "rejected"
			var ve *events.ValidationError
			if errors.As(err, &ve) {
				gp.Rejected = ve.Problems
			} else {
				gp.Rejected = []events.FieldError{{Message: err.Error()}}
			}
			gp.Status = planner.Status{Kind: planner.Rejected, Reason: "the desired contract refuses it: nothing would be published for it"}
			r.Guests, r.Changes = append(r.Guests, gp), true
			continue
		}
		var before *events.Desired
		if v := p.Views[e.VMID]; v != nil && v.Desired != nil {
			before = v.Desired
		}
		gp.Desired, gp.Changed = compare(before, d)
		ev := projector.Event{Seq: base + uint64(i) + 2, Subject: events.StoredSubject(events.KindDesired, in.Cluster, e.VMID, planner.DefaultPartitions),
			Header: hdr, Data: e.Body, Time: in.Now}
		if ch := p.Apply(ev); ch.Err != nil {
			return nil, fmt.Errorf("entry %d (vmid %d): %w", i+1, e.VMID, ch.Err)
		}
		v := p.Views[e.VMID]
		g.managedNow(v, before != nil)
		dec := planner.Plan(v, p.State, r.Policy, in.Now)
		dec = g.admit(v, dec)
		gp.Status, gp.Steps = dec.Status, dec.Steps
		gp.Waits, gp.Restart = classify(dec)
		if len(gp.Steps) > 0 {
			r.Actions++
		}
		if gp.Desired != "unchanged" || len(gp.Steps) > 0 || !gp.Status.Kind.Done() {
			r.Changes = true
		}
		r.Guests = append(r.Guests, gp)
	}
	return r, nil
}

// restore is a projector holding copies of the documents' views, and the
// newest sequence they reflect.
func restore(cluster string, cd *views.ClusterDoc, docs []views.GuestDoc) (*projector.Projector, uint64, error) {
	s := &projector.Snapshot{Version: projector.SnapshotVersion, Cluster: cluster, Seq: cd.Seq, State: cd.State, Views: map[int]*projector.View{}}
	if s.State.Cluster == "" {
		s.State.Cluster = cluster
	}
	for i := range docs {
		v := docs[i].View
		if v == nil {
			continue
		}
		c := v.Clone()
		s.Views[c.VMID] = c
		s.Seq = max(s.Seq, c.DesiredSeq, c.LastActionSeq, c.ObservedSeq, c.InFlightSeq)
	}
	p, err := projector.Restore(s, cluster, nil)
	return p, s.Seq, err
}

// compare says how d differs from the desired state in force (nil: none).
func compare(before, d *events.Desired) (string, []string) {
	if before == nil {
		return "new", nil
	}
	a, b := fieldsOf(before), fieldsOf(d)
	var changed []string
	for k, v := range b {
		if w, ok := a[k]; !ok || !bytes.Equal(w, v) {
			changed = append(changed, k)
		}
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			changed = append(changed, k)
		}
	}
	slices.Sort(changed)
	if len(changed) == 0 {
		return "unchanged", nil
	}
	return "changed", changed
}

func fieldsOf(d *events.Desired) map[string][]byte {
	raw, _ := json.Marshal(d)
	var m map[string]json.RawMessage
	_ = json.Unmarshal(raw, &m)
	out := make(map[string][]byte, len(m))
	for k, v := range m {
		if k == "schema" || k == "publisher" || k == "time" || k == "correlation_id" {
			continue
		}
		var c bytes.Buffer
		if json.Compact(&c, v) == nil {
			out[k] = c.Bytes()
		}
	}
	return out
}

// FromViews plans in's entries against the documents r holds (in.Docs and
// in.ClusterDoc are read from it).
func FromViews(ctx context.Context, r views.Reader, in Input) (*Result, error) {
	docs, err := r.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading views: %w", err)
	}
	cd, err := r.ClusterDoc(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading views: %w", err)
	}
	in.Docs, in.ClusterDoc = docs, cd
	if in.Cluster == "" {
		in.Cluster = r.Cluster
	}
	return Plan(in)
}

// Rejected counts the entries the desired contract refuses.
func (r *Result) Rejected() int {
	n := 0
	for _, g := range r.Guests {
		if g.Desired == "rejected" {
			n++
		}
	}
	return n
}
