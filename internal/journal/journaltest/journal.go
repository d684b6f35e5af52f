package journaltest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/journal"
)

// Journal is an in-memory journal. It is safe for concurrent use.
type Journal struct {
	partitions int
	now        func() time.Time

	mu      sync.Mutex
	entries []journal.Entry
	last    map[string]uint64 // stored subject → its newest sequence
	msgIDs  map[string]uint64
	// failAppends, when set, makes Appends fail with it (an unreachable
	// journal) once okAppends more have succeeded.
	failAppends error
	okAppends   int
	consumers   map[string]*consumer
}

var (
	_ journal.Reader        = (*Journal)(nil)
	_ journal.Appender      = (*Journal)(nil)
	_ journal.AsyncAppender = (*Journal)(nil)
	_ journal.Consumer      = (*Journal)(nil)
)

// New returns an empty journal of the given partition count, stamping
// entries with now.
func New(partitions int, now func() time.Time) *Journal {
	return &Journal{partitions: partitions, now: now, last: map[string]uint64{}, msgIDs: map[string]uint64{},
		consumers: map[string]*consumer{}}
}

// stored is a published subject as the stream's transform stores it:
// pve.<kind>.<cluster>.<vmid> gains the partition token.
func (j *Journal) stored(subject string) string {
	t := strings.Split(subject, ".")
	if len(t) != 4 {
		return subject
	}
	vmid, err := strconv.Atoi(t[3])
	if err != nil {
		return subject
	}
	return subject + "." + strconv.Itoa(events.Partition(t[2], vmid, j.partitions))
}

// Append implements journal.Appender.
func (j *Journal) Append(_ context.Context, m events.Message, x journal.Expect) (journal.Ack, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.failAppends != nil {
		if j.okAppends == 0 {
			return journal.Ack{}, j.failAppends
		}
		j.okAppends--
	}
	return j.appendLocked(m, x)
}

// FailAppends makes Appends fail with err after n more succeed; nil err
// heals the journal.
func (j *Journal) FailAppends(err error, n int) {
	j.mu.Lock()
	j.failAppends, j.okAppends = err, n
	j.mu.Unlock()
}

func (j *Journal) appendLocked(m events.Message, x journal.Expect) (journal.Ack, error) {
	if x.MsgID != "" {
		if seq, ok := j.msgIDs[x.MsgID]; ok {
			return journal.Ack{Seq: seq, Duplicate: true}, nil
		}
	}
	subject := j.stored(m.Subject)
	if x.Fenced && j.last[subject] != x.LastSubjectSeq {
		return journal.Ack{}, fmt.Errorf("%w: %s ends at %d, not %d", journal.ErrFenced, subject, j.last[subject], x.LastSubjectSeq)
	}
	seq := uint64(len(j.entries)) + 1
	hdr := events.Header{}
	for k, v := range m.Header {
		hdr[k] = append([]string(nil), v...)
	}
	j.entries = append(j.entries, journal.Entry{Seq: seq, Subject: subject, Header: hdr, Data: append([]byte(nil), m.Data...), Time: j.now()})
	j.last[subject] = seq
	if x.MsgID != "" {
		j.msgIDs[x.MsgID] = seq
	}
	for _, c := range j.consumers {
		c.wake()
	}
	return journal.Ack{Seq: seq}, nil
}

// Publish appends m without preconditions and returns its sequence; it
// panics on failure (test setup).
func (j *Journal) Publish(m events.Message) uint64 {
	a, err := j.Append(context.Background(), m, journal.Expect{})
	if err != nil {
		panic(err)
	}
	return a.Seq
}

// AppendAsync implements journal.AsyncAppender: the outcome is known at once.
func (j *Journal) AppendAsync(m events.Message, x journal.Expect) (journal.Future, error) {
	a, err := j.Append(context.Background(), m, x)
	return done{a, err}, nil
}

type done struct {
	a   journal.Ack
	err error
}

func (d done) Poll() (journal.Ack, error, bool)          { return d.a, d.err, true }
func (d done) Wait(context.Context) (journal.Ack, error) { return d.a, d.err }

// Info returns the journal's extent.
func (j *Journal) Info(context.Context) (journal.Info, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := uint64(len(j.entries))
	info := journal.Info{LastSeq: n, Msgs: n}
	if n > 0 {
		info.FirstSeq = 1
	}
	return info, nil
}

// Entries returns a copy of every entry, oldest first.
func (j *Journal) Entries() []journal.Entry {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]journal.Entry(nil), j.entries...)
}

// Lasts implements journal.Reader.
func (j *Journal) Lasts(_ context.Context, cluster string, vmid int, kinds ...events.Kind) ([]*journal.Entry, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]*journal.Entry, len(kinds))
	for i, k := range kinds {
		if seq := j.last[events.StoredSubject(k, cluster, vmid, j.partitions)]; seq > 0 {
			e := j.entries[seq-1]
			out[i] = &e
		}
	}
	return out, nil
}

// Next implements journal.Reader.
func (j *Journal) Next(_ context.Context, kind events.Kind, cluster string, vmid int, seq uint64) (*journal.Entry, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	subject := events.StoredSubject(kind, cluster, vmid, j.partitions)
	for i := max(seq, 1) - 1; i < uint64(len(j.entries)); i++ {
		if j.entries[i].Subject == subject {
			e := j.entries[i]
			return &e, nil
		}
	}
	return nil, nil
}

// Get implements journal.Reader.
func (j *Journal) Get(_ context.Context, seq uint64) (*journal.Entry, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if seq == 0 || seq > uint64(len(j.entries)) {
		return nil, nil
	}
	e := j.entries[seq-1]
	return &e, nil
}
