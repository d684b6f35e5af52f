package revise

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/journal"
)

// Headers of a rollback's desired event (events.HeaderRollbackTo, …;
// who asked is the publisher header, as for every desired event).
const (
	HeaderRollbackTo   = events.HeaderRollbackTo
	HeaderRollbackFrom = events.HeaderRollbackFrom
)

// Journal reads entries by sequence and the journal's extent.
type Journal interface {
	journal.Reader
	Info(ctx context.Context) (journal.Info, error)
}

// Rollback is a rollback computed, not yet published.
type Rollback struct {
	VMID int `json:"vmid"`
	// To is the revision restored, From the one in force (0: none).
	To   uint64 `json:"to"`
	From uint64 `json:"from,omitempty"`
	// Desired is what the rollback publishes.
	Desired *events.Desired `json:"desired"`
	// Notes say where it differs from revision To, and why.
	Notes []string `json:"notes,omitempty"`
}

const gib = 1 << 30

// Revision reads the guest's desired revision seq, failing with the
// reason when it is not one: dropped by retention, no such entry, or
// another guest's or kind's event.
func Revision(ctx context.Context, j Journal, cluster string, vmid int, seq uint64) (*events.Desired, error) {
	e, err := j.Get(ctx, seq)
	if err != nil {
		return nil, err
	}
	if e == nil {
		info, err := j.Info(ctx)
		if err != nil {
			return nil, err
		}
		if seq < info.FirstSeq {
			return nil, fmt.Errorf("revision %d of guest %d is no longer in the journal: retention dropped it (the journal now starts at #%d; docs/retention.md)", seq, vmid, info.FirstSeq)
		}
		if seq > info.LastSeq {
			return nil, fmt.Errorf("revision %d: the journal ends at #%d", seq, info.LastSeq)
		}
		return nil, fmt.Errorf("revision %d of guest %d is no longer in the journal: it was deleted from the stream", seq, vmid)
	}
	si, err := events.ParseSubject(e.Subject)
	if err != nil || si.Kind != events.KindDesired || si.VMID != vmid || si.Cluster != cluster {
		return nil, fmt.Errorf("#%d is not a desired revision of guest %d (cluster %s) but an event on %s; `converge history %d` lists its revisions", seq, vmid, cluster, e.Subject, vmid)
	}
	d, err := events.DecodeDesired(e.Data, vmid)
	if err != nil {
		return nil, fmt.Errorf("revision %d of guest %d was rejected, never in force: %w", seq, vmid, err)
	}
	return d, nil
}

// RevisionAt finds the guest's desired revision in force at t: its last
// valid desired event journalled at or before t.
func RevisionAt(ctx context.Context, j Journal, cluster string, vmid int, t time.Time) (uint64, error) {
	info, err := j.Info(ctx)
	if err != nil {
		return 0, err
	}
	var found uint64
	for seq := info.FirstSeq; ; {
		e, err := j.Next(ctx, events.KindDesired, cluster, vmid, seq)
		if err != nil {
			return 0, err
		}
		if e == nil || e.Time.After(t) {
			break
		}
		if _, err := events.DecodeDesired(e.Data, vmid); err == nil {
			found = e.Seq
		}
		seq = e.Seq + 1
	}
	if found == 0 {
		why := ""
		if info.FirstSeq > 1 {
			why = fmt.Sprintf(" (retention dropped everything before #%d)", info.FirstSeq)
		}
		return 0, fmt.Errorf("guest %d had no desired revision in the journal at %s%s", vmid, t.UTC().Format(time.RFC3339), why)
	}
	return found, nil
}

// PlanRollback computes the rollback of guest vmid to revision to (read
// from j), given its desired state in force (cur, zero when none) and its
// newest observation (nil when unknown): what would be published, with
// notes. Disks never shrink: a disk larger now (desired or in Proxmox)
// keeps its size. The set membership stays as it is now.
func PlanRollback(ctx context.Context, j Journal, cluster string, vmid int, to uint64, cur Current, obs *events.Observed) (*Rollback, error) {
	old, err := Revision(ctx, j, cluster, vmid, to)
	if err != nil {
		return nil, err
	}
	return RollbackOf(vmid, to, old, cur, obs), nil
}

// RollbackOf is PlanRollback's computation on revision to's desired
// state old.
func RollbackOf(vmid int, to uint64, old *events.Desired, cur Current, obs *events.Observed) *Rollback {
	d := *old
	rb := &Rollback{VMID: vmid, To: to, From: cur.Seq, Desired: &d}
	if cur.Desired != nil {
		if cur.Desired.Set != d.Set {
			rb.Notes = append(rb.Notes, fmt.Sprintf("set: kept %q (revision %d said %q): a rollback does not move a guest between sets", cur.Desired.Set, to, d.Set))
		}
		d.Set = cur.Desired.Set
	}
	if d.Disks != nil {
		d.Disks = maps.Clone(d.Disks)
		for _, k := range sortedKeys(d.Disks) {
			w := d.Disks[k]
			now, exact := w.SizeGiB, true
			if cur.Desired != nil {
				if c, ok := cur.Desired.Disks[k]; ok && c.SizeGiB > now {
					now = c.SizeGiB
				}
			}
			if obs != nil {
				if od, ok := obs.Config.Disks[k]; ok && od.SizeBytes > int64(now)*gib {
					now, exact = int(od.SizeBytes/gib), od.SizeBytes%gib == 0
				}
			}
			switch {
			case !exact:
				delete(d.Disks, k)
				rb.Notes = append(rb.Notes, fmt.Sprintf("disk %s: revision %d had %d GiB, the disk is larger now and not a whole number of GiB: left out (disks never shrink)", k, to, w.SizeGiB))
			case now != w.SizeGiB:
				w.SizeGiB = now
				d.Disks[k] = w
				rb.Notes = append(rb.Notes, fmt.Sprintf("disk %s: revision %d had %d GiB, the disk is %d GiB now: kept at %d GiB (disks never shrink)", k, to, old.Disks[k].SizeGiB, now, now))
			}
		}
		if len(d.Disks) == 0 {
			d.Disks = nil
		}
	}
	if d.Absent {
		rb.Notes = append(rb.Notes, fmt.Sprintf("revision %d says the guest should not exist: its destroy waits behind the gate (converge approve)", to))
	}
	return rb
}

func sortedKeys(m map[string]events.DiskWant) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// Message is the rollback's desired message: publisher, correlation id
// and the rollback headers set; sign it before publishing if need be.
func (rb *Rollback) Message(cluster, publisher, correlationID string) (events.Message, error) {
	m, err := events.DesiredMessage(rb.Desired, events.PublishOptions{Cluster: cluster, Publisher: publisher, CorrelationID: correlationID})
	if err != nil {
		return m, err
	}
	m.Header.Set(HeaderRollbackTo, strconv.FormatUint(rb.To, 10))
	if rb.From != 0 {
		m.Header.Set(HeaderRollbackFrom, strconv.FormatUint(rb.From, 10))
	}
	return m, nil
}
