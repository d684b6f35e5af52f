package revise

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/control"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/views"
)

// Current is a guest's desired state in force and its revision.
type Current struct {
	Desired *events.Desired
	Seq     uint64
}

// Currents reads every managed guest's desired state in force from the
// planner's views (a released guest has none).
func Currents(ctx context.Context, r views.Reader) (map[int]Current, error) {
	docs, err := r.List(ctx)
	if err != nil {
		return nil, err
	}
	out := map[int]Current{}
	for _, d := range docs {
		if v := d.View; v != nil && v.Desired != nil {
			out[v.VMID] = Current{Desired: v.Desired, Seq: v.DesiredSeq}
		}
	}
	return out, nil
}

// Release is a guest a pruning publish releases, and why.
type Release struct {
	VMID   int    `json:"vmid"`
	Set    string `json:"set"`
	Reason string `json:"reason"`
}

// SetReleases are the releases of a `--set set --prune` publish of file:
// the set's members in current missing from the file, by vmid.
func SetReleases(set string, file []*events.Desired, current map[int]Current) []Release {
	in := map[int]bool{}
	for _, d := range file {
		in[d.VMID] = true
	}
	var out []Release
	for vmid, c := range current {
		if c.Desired.Set == set && !in[vmid] {
			out = append(out, Release{VMID: vmid, Set: set, Reason: fmt.Sprintf(
				"a member of set %s (desired revision %d) missing from the file: released, not destroyed", set, c.Seq)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].VMID < out[j].VMID })
	return out
}

// Conflict is a guest of the file that another set holds.
type Conflict struct {
	VMID int    `json:"vmid"`
	Set  string `json:"set"`  // the set the file puts it in
	Held string `json:"held"` // the set that holds it now
}

func (c Conflict) String() string {
	return fmt.Sprintf("guest %d is a member of set %s, not %s (--move moves it)", c.VMID, c.Held, c.Set)
}

// SetConflicts are the file's guests whose desired state in force puts
// them in another set than the file does.
func SetConflicts(file []*events.Desired, current map[int]Current) []Conflict {
	var out []Conflict
	for _, d := range file {
		c, ok := current[d.VMID]
		if ok && d.Set != "" && c.Desired.Set != "" && c.Desired.Set != d.Set {
			out = append(out, Conflict{VMID: d.VMID, Set: d.Set, Held: c.Desired.Set})
		}
	}
	return out
}

// InSet puts every entry of file in set: an entry that names another set
// is refused.
func InSet(set string, file []*events.Desired) error {
	if err := events.ValidSet(set); err != nil {
		return err
	}
	var bad []string
	for _, d := range file {
		switch d.Set {
		case "", set:
			d.Set = set
		default:
			bad = append(bad, fmt.Sprintf("guest %d says set %s", d.VMID, d.Set))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("--set %s: %s", set, strings.Join(bad, "; "))
	}
	return nil
}

// MayRelease checks that j's writer may publish control requests on
// cluster: a publish fenced beyond any sequence, which a permitted writer
// sees refused by its fence (nothing stored) and another by the server.
func MayRelease(ctx context.Context, j journal.Appender, cluster string) error {
	m := events.Message{Subject: events.ClusterSubject(events.KindControl, cluster), Data: []byte("{}"), Header: events.Header{}}
	_, err := j.Append(ctx, m, journal.FencedAt(math.MaxInt64))
	switch {
	case errors.Is(err, journal.ErrFenced):
		return nil
	case err == nil:
		return errors.New("the journal stored a fenced probe: it does not check fences")
	case errors.Is(err, journal.ErrNotPermitted):
		return fmt.Errorf("--prune releases guests, a control request this NATS user may not publish (use the api or admin user); nothing was published: %w", err)
	}
	return fmt.Errorf("checking that this NATS user may publish control requests: %w", err)
}

// SetOptions say how a set is published.
type SetOptions struct {
	Cluster, Set  string
	Prune, Move   bool
	Publisher     string
	CorrelationID string
	// Sign, if set, signs each desired message before it is published.
	Sign func(*events.Message) error
	Now  func() time.Time
}

// Published is one desired state journalled.
type Published struct {
	VMID int    `json:"vmid"`
	Seq  uint64 `json:"seq"`
}

// SetResult is what a set's publish journalled.
type SetResult struct {
	Published  []Published `json:"published"`
	Releases   []Release   `json:"releases,omitempty"`
	ReleaseSeq uint64      `json:"release_seq,omitempty"`
}

// PublishSet publishes file as set o.Set: refused before anything is
// published when a guest is held by another set (unless o.Move) or, with
// o.Prune, when the writer may not release; then every desired state,
// then one release of the set's members missing from the file.
func PublishSet(ctx context.Context, j journal.Appender, current map[int]Current, file []*events.Desired, o SetOptions) (SetResult, error) {
	var res SetResult
	if err := InSet(o.Set, file); err != nil {
		return res, err
	}
	if cs := SetConflicts(file, current); len(cs) > 0 && !o.Move {
		msgs := make([]string, len(cs))
		for i, c := range cs {
			msgs[i] = c.String()
		}
		return res, fmt.Errorf("nothing published: %s", strings.Join(msgs, "; "))
	}
	if o.Prune {
		if err := MayRelease(ctx, j, o.Cluster); err != nil {
			return res, err
		}
		res.Releases = SetReleases(o.Set, file, current)
	}
	for _, d := range file {
		m, err := events.DesiredMessage(d, events.PublishOptions{Cluster: o.Cluster, Publisher: o.Publisher, CorrelationID: o.CorrelationID})
		if err != nil {
			return res, err
		}
		if o.Sign != nil {
			if err := o.Sign(&m); err != nil {
				return res, err
			}
		}
		ack, err := j.Append(ctx, m, journal.Expect{})
		if err != nil {
			return res, fmt.Errorf("publish desired %d: %w", d.VMID, err)
		}
		res.Published = append(res.Published, Published{d.VMID, ack.Seq})
	}
	if len(res.Releases) == 0 {
		return res, nil
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	c := events.Control{Meta: events.NewMeta(o.Publisher, o.CorrelationID, now()), Command: events.CommandRelease}
	for _, r := range res.Releases {
		c.VMIDs = append(c.VMIDs, r.VMID)
	}
	slices.Sort(c.VMIDs)
	seq, err := control.Publish(ctx, j, o.Cluster, c)
	if err != nil {
		return res, fmt.Errorf("the desired states are journalled, the releases are not: %w", err)
	}
	res.ReleaseSeq = seq
	return res, nil
}
