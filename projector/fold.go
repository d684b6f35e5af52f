package projector

import (
	"fmt"
	"strings"
	"time"

	"github.com/converge-pve/converge/events"
)

// Event is one stored journal entry.
type Event struct {
	Seq     uint64
	Subject string
	Header  events.Header
	Data    []byte
	// Time is the stream's receive time.
	Time time.Time

	pre *pre // set by Predecode
}

// Projector holds the views of one cluster.
type Projector struct {
	Cluster string
	Views   map[int]*View
	State   ClusterState
	// LastSeq is the last sequence applied.
	LastSeq uint64
	// Partitions is the journal's partition count. When set, an event
	// stored under another partition than its guest's is not folded
	// (events.SubjectInfo.CheckPartition).
	Partitions int `json:"-"` // configuration, not fold state

	// Auth, if set, checks the signatures of desired events (sign.go).
	Auth *Auth `json:"-"`

	// strs interns the few distinct values that recur in every event
	// (publishers, nodes, operations): one copy instead of one per guest.
	strs map[string]string
	// gen counts snapshots: a view of an older generation may be shared
	// with a snapshot, and is copied before it changes (mutable).
	gen uint64
	// enums holds one pointer per enumerated desired value (enumPtr).
	enums map[string]any
	// The shared desired values (shareValues): fleets repeat a few sizes,
	// descriptions, pools and tag sets. tagKey is scratch for a tag set's
	// key.
	ints   map[int]*int
	texts  map[string]*string
	tagSet map[string]*[]string
	tagKey []byte
}

// New returns an empty projector for a cluster.
func New(cluster string) *Projector {
	return &Projector{Cluster: cluster, Views: map[int]*View{}, State: ClusterState{Cluster: cluster}}
}

// Change says what an applied event did.
type Change struct {
	// View is the guest view the event changed, or nil.
	View *View
	// Cluster is true when cluster state changed (heartbeat, resync).
	Cluster bool
	// Resync is true for a resync request.
	Resync bool
	// Guests are the views an operator request (pause, resume, approve,
	// release) changed; All is set when it concerned every guest.
	Guests []*View
	All    bool
	// Err describes an event that could not be folded (it is skipped).
	Err error
	// Info is the view whose informational part alone changed (guest
	// agent addresses, addresses.go): its document, nothing to plan.
	Info *View
}

// Apply folds one event. Events of other clusters and sequences already
// applied are ignored.
func (p *Projector) Apply(ev Event) Change {
	if ev.Seq != 0 && ev.Seq <= p.LastSeq {
		return Change{}
	}
	if ev.Seq != 0 {
		p.LastSeq = ev.Seq
	}
	var info events.SubjectInfo
	var err error
	if ev.pre != nil {
		info, err = ev.pre.info, ev.pre.infoErr
	} else {
		info, err = events.ParseSubject(ev.Subject)
	}
	if err == nil && p.Partitions > 0 {
		err = info.CheckPartition(p.Partitions)
	}
	if err != nil {
		return Change{Err: err}
	}
	if info.Cluster != p.Cluster {
		return Change{}
	}
	switch info.Kind {
	case events.KindHeartbeat:
		return p.foldHeartbeat(ev)
	case events.KindControl:
		c, err := decodeAs[events.Control](ev)
		if err != nil {
			return Change{Err: err}
		}
		return p.foldControl(&c, ev)
	}
	if info.Kind == events.KindAddresses {
		return p.foldAddresses(info.VMID, ev) // informational (addresses.go)
	}
	_, known := p.Views[info.VMID]
	v := p.view(info.VMID)
	var ferr error
	switch info.Kind {
	case events.KindDesired:
		p.foldDesired(v, ev)
	case events.KindObserved:
		ferr = p.foldObserved(v, ev)
	case events.KindAction:
		ferr = p.foldAction(v, ev)
	case events.KindResult:
		ferr = p.foldResult(v, ev)
	}
	if ferr != nil {
		if !known {
			// An undecodable event must not make a phantom guest appear.
			delete(p.Views, info.VMID)
			return Change{Err: ferr}
		}
		return Change{View: v, Err: ferr}
	}
	v.Seq = ev.Seq
	return Change{View: v}
}

func (p *Projector) foldDesired(v *View, ev Event) {
	// Header values are views into the client's copy of the message's
	// header block: what the view keeps is its own (publishers interned).
	publisher := ev.Header.Get(events.HeaderPublisher)
	if publisher == "" {
		publisher = "unknown"
	}
	p.intern(&publisher)
	why, signedBy := p.checkSignature(v, ev)
	if why != "" {
		v.Rejected = &Rejection{Seq: ev.Seq, Reason: why, Publisher: publisher, At: ev.Time}
		return
	}
	var d *events.Desired
	var err error
	if ev.pre != nil {
		d, _ = ev.pre.val.(*events.Desired)
		err = ev.pre.err
	} else {
		d, err = events.DecodeDesired(ev.Data, v.VMID)
	}
	if err == nil && ev.Header.Get(events.HeaderSchema) != "" && ev.Header.Get(events.HeaderSchema) != "1" {
		err = fmt.Errorf("unsupported schema version %q (this converge reads 1)", ev.Header.Get(events.HeaderSchema))
	}
	if err != nil {
		v.Rejected = &Rejection{Seq: ev.Seq, Reason: events.TruncateReason(err.Error()), Publisher: publisher, At: ev.Time}
		return
	}
	if d.Tags != nil {
		for i := range *d.Tags {
			p.intern(&(*d.Tags)[i])
		}
	}
	p.shareValues(d)
	v.Desired, v.DesiredSeq, v.DesiredAt, v.Publisher, v.SignedBy = d, ev.Seq, ev.Time, publisher, signedBy
	v.CorrelationID = strings.Clone(ev.Header.Get(events.HeaderCorrelationID))
	if v.CorrelationID == "" {
		v.CorrelationID = fmt.Sprintf("desired-%s-%d-%d", v.Cluster, v.VMID, ev.Seq)
	}
	v.Rejected, v.Released, v.Held = nil, nil, nil
	v.RevisionActions = 0
	v.Failures, v.LastFailureAt, v.LastError, v.LastErrorKind, v.Terminal = 0, time.Time{}, "", "", false
	v.Burst, v.BurstStart, v.Repeats, v.LastRepeatAt = 0, time.Time{}, 0, time.Time{}
}

// MaxReadAhead is how far an observation's read_at may be ahead of the
// stream's time for the event that carries it: further ahead, the reader's
// clock (or the event) is wrong and the observation is refused.
const MaxReadAhead = time.Minute

// streamTime is the event's stream time, or fallback for events without one
// (tests folding bodies alone).
func streamTime(ev Event, fallback time.Time) time.Time {
	if ev.Time.IsZero() {
		return fallback
	}
	return ev.Time
}

// refuse returns why an observation carried by ev cannot be used, "" if it
// can.
func refuse(o *events.Observed, ev Event) string {
	if !ev.Time.IsZero() && o.ReadAt.After(ev.Time.Add(MaxReadAhead)) {
		return fmt.Sprintf("read_at %s is %s ahead of the journal's time %s (reader's clock wrong?)",
			o.ReadAt.Format(time.RFC3339), o.ReadAt.Sub(ev.Time).Round(time.Second), ev.Time.Format(time.RFC3339))
	}
	return ""
}

// Supersedes reports whether observation o read after journal sequence
// o.AfterSeq is a later read of the guest than cur, carried by the event at
// sequence curSeq. Reads are ordered by the journal, never by clocks: o is
// later only if its reader knew curSeq before reading (AfterSeq >= curSeq).
// An observation without AfterSeq (another publisher) falls back to
// comparing read_at. The executor's observation fence uses the same rule.
func Supersedes(o *events.Observed, cur *events.Observed, curSeq uint64) bool {
	switch {
	case o.AfterSeq > 0:
		return o.AfterSeq >= curSeq
	case cur == nil:
		return true
	default:
		return !o.ReadAt.Before(cur.ReadAt)
	}
}

func (p *Projector) foldObserved(v *View, ev Event) error {
	o, err := decodeAs[events.Observed](ev)
	if err != nil {
		return err
	}
	p.internObserved(&o)
	shareDesired(&o, v.Desired)
	v.ObservedEventSeq = ev.Seq
	if why := refuse(&o, ev); why != "" {
		v.RefusedObservation = &Rejection{Seq: ev.Seq, Reason: why, Publisher: o.Publisher, At: ev.Time}
		return nil
	}
	if Supersedes(&o, v.Observed, v.ObservedSeq) {
		// A guest desired absent going is what converge asked for, not a
		// loss of the inventory.
		if v.Desired != nil && !v.Desired.Absent && v.Observed != nil && v.Observed.Exists && !o.Exists {
			p.lost(v.VMID, ev)
		}
		p.noteTemplate(v.VMID, &o)
		v.Observed, v.ObservedSeq = &o, ev.Seq
		v.noteGone(ev.Seq)
	}
	return nil
}

// noteTemplate keeps State.Templates in step with an adopted observation
// (copy on write: a snapshot may share the map).
func (p *Projector) noteTemplate(vmid int, o *events.Observed) {
	t, had := p.State.Templates[vmid]
	is := o.Exists && o.Template
	storage := ""
	if is {
		storage = TemplateStorage(o)
	}
	if is == had && (!is || (t.Node == o.Node && t.Kind == o.Kind && t.Storage == storage)) {
		return
	}
	m := make(map[int]Template, len(p.State.Templates)+1)
	for k, v := range p.State.Templates {
		m[k] = v
	}
	if is {
		m[vmid] = Template{Node: o.Node, Kind: o.Kind, Storage: storage}
	} else {
		delete(m, vmid)
	}
	p.State.Templates = m
}

// lost records a managed guest the observer found gone.
func (p *Projector) lost(vmid int, ev Event) {
	l := &p.State.Losses
	if len(*l) >= MaxLosses {
		*l = append((*l)[:0:0], (*l)[len(*l)-MaxLosses+1:]...)
	}
	*l = append(*l, Loss{VMID: vmid, Seq: ev.Seq, At: ev.Time})
}

func (p *Projector) foldAction(v *View, ev Event) error {
	a, err := decodeAs[events.Action](ev)
	if err != nil {
		return err
	}
	for _, s := range []*string{&a.Publisher, &a.Cluster, &a.Node, (*string)(&a.Kind), (*string)(&a.Op), &a.Reason} {
		p.intern(s)
	}
	share(&a.CorrelationID, v.CorrelationID)
	v.LastAction, v.LastActionSeq = &a, ev.Seq
	if a.DesiredSeq == v.DesiredSeq {
		v.RevisionActions++
	}
	if a.Op == events.OpHold {
		// A record, not work: nothing is in flight.
		v.Held = &Hold{Seq: ev.Seq, DesiredSeq: a.DesiredSeq, Op: a.Holds, Reason: a.Reason, At: streamTime(ev, a.Time)}
		return nil
	}
	if h := v.Held; h != nil && h.Op == a.Op {
		v.Held = nil // the held step goes ahead (approved): the hold is spent
	}
	v.InFlight, v.InFlightSeq, v.Started = &a, ev.Seq, nil
	return nil
}

func (p *Projector) foldResult(v *View, ev Event) error {
	r, err := decodeAs[events.Result](ev)
	if err != nil {
		return err
	}
	for _, s := range []*string{&r.Publisher, &r.Cluster, &r.Node, (*string)(&r.Op), (*string)(&r.Status), &r.Executor, (*string)(&r.ErrorClass)} {
		p.intern(s)
	}
	if r.Observed != nil {
		p.internObserved(r.Observed)
		shareDesired(r.Observed, v.Desired)
	}
	for _, a := range []*events.Action{v.InFlight, v.LastAction} {
		if a != nil && a.ID == r.ActionID {
			r.ActionID = a.ID
			share(&r.CorrelationID, a.CorrelationID)
			break
		}
	}
	// An executor's read-back follows its own action, and a guest's
	// actions run one at a time: it is the newest read, whatever the
	// clocks say (a skewed reader must not make it look old: the planner
	// would re-plan from the stale view over and over).
	// Only a result of the guest's own action carries a read-back the
	// fold adopts: a result for any other action id (forged, or another
	// cluster's executor gone astray) must not rewrite what converge
	// believes the guest is.
	ours := (v.InFlight != nil && v.InFlight.ID == r.ActionID) || (v.LastAction != nil && v.LastAction.ID == r.ActionID)
	// A read-back derived from the action's basis instead of read
	// (AfterSeq set) is adopted alike. The executor derives one only if no
	// observation of the guest was journalled after what it had read
	// before acting (else it reads the guest), so an observation journalled
	// between that check and this result was read while the action ran,
	// maybe before its outcome (a pass begun before the action was
	// journalled; pvestatd's lagging status): held against the read-back,
	// it had the planner repeat the action (a second start of a guest
	// already running). Observations journalled after the result
	// supersede it by the usual rule (foldObserved); a real change read
	// meanwhile is read again by the observer and published after it (its
	// confirmation).
	if r.Observed != nil && ours {
		if why := refuse(r.Observed, ev); why != "" {
			v.RefusedObservation = &Rejection{Seq: ev.Seq, Reason: why, Publisher: r.Publisher, At: ev.Time}
		} else {
			v.Observed, v.ObservedSeq = r.Observed, ev.Seq
			v.noteGone(ev.Seq)
		}
	}
	if r.Status == events.ResultStarted {
		if v.InFlight != nil && v.InFlight.ID == r.ActionID {
			v.Started = &r
		}
		return nil
	}
	v.LastResult, v.LastResultSeq = &r, ev.Seq
	var planned *events.Action
	if v.InFlight != nil && v.InFlight.ID == r.ActionID {
		planned = v.InFlight
		v.InFlight, v.InFlightSeq, v.Started = nil, 0, nil
		if v.LastAction == planned {
			// A finished action's payload is history: keep what status shows.
			done := *planned
			done.Set, done.Delete, done.Digest = nil, nil, ""
			v.LastAction = &done
		}
	}
	if planned == nil || planned.DesiredSeq != v.DesiredSeq {
		return nil // a result for an older revision does not count against this one
	}
	at := streamTime(ev, r.Time) // backoff runs on the journal's clock, not the executor's
	switch r.Status {
	case events.ResultSucceeded, events.ResultSkipped:
		if r.Status == events.ResultSucceeded {
			v.Failures, v.LastError, v.LastErrorKind, v.Terminal = 0, "", "", false
		}
		// Actions that finish without failing yet leave the guest to be
		// acted on again count towards the burst cap (planner.Policy);
		// one that met a Proxmox lock (a backup may hold it for hours)
		// only backs off.
		if v.BurstStart.IsZero() || at.Sub(v.BurstStart) >= BurstWindow {
			v.BurstStart, v.Burst = at, 0
		}
		if r.ErrorClass != events.ClassLocked {
			v.Burst++
		}
		// "Already done" and repeated digest conflicts mean the plan keeps
		// missing: they back off like failures.
		if r.ErrorClass == events.ClassAlreadyDone || r.Status == events.ResultSkipped {
			v.Repeats++
			v.LastRepeatAt = at
		} else {
			v.Repeats = 0
		}
	case events.ResultFailed:
		v.Failures++
		v.LastFailureAt, v.LastError, v.LastErrorKind = at, r.Error, r.ErrorClass
		v.Terminal = r.ErrorClass.Terminal()
		if r.ErrorClass == events.ClassConflict {
			v.Repeats++
			v.LastRepeatAt = at
		} else {
			v.Repeats = 0
		}
	}
	return nil
}
