package journaltest

import (
	"context"
	"fmt"
	"slices"
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
	entries []journal.Entry   // every entry ever appended, trimmed ones too
	first   uint64            // entries before it are trimmed (Trim)
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
	_ journal.Kept          = (*Journal)(nil)
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
	if last := j.lastLocked(subject); x.Fenced && last != x.LastSubjectSeq {
		return journal.Ack{}, fmt.Errorf("%w: %s ends at %d, not %d", journal.ErrFenced, subject, last, x.LastSubjectSeq)
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
	if j.first > 1 {
		// As JetStream after a cut: FirstSeq may be LastSeq+1, empty.
		info.FirstSeq = j.first
		info.Msgs = n - min(n, j.first-1)
	}
	return info, nil
}

// Entries returns a copy of every entry, oldest first, trimmed ones too.
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
		if seq := j.lastLocked(events.StoredSubject(k, cluster, vmid, j.partitions)); seq > 0 {
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
	for i := max(seq, j.first, 1) - 1; i < uint64(len(j.entries)); i++ {
		if j.entries[i].Subject == subject {
			e := j.entries[i]
			return &e, nil
		}
	}
	return nil, nil
}

// NextOfKind implements journal.KindReader.
func (j *Journal) NextOfKind(_ context.Context, kind events.Kind, cluster string, seq uint64) (*journal.Entry, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	prefix := events.ClusterSubject(kind, cluster) + "."
	for i := max(seq, j.first, 1) - 1; i < uint64(len(j.entries)); i++ {
		if strings.HasPrefix(j.entries[i].Subject, prefix) {
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
	if seq == 0 || seq < j.first || seq > uint64(len(j.entries)) {
		return nil, nil
	}
	e := j.entries[seq-1]
	return &e, nil
}

// lastLocked is the subject's newest entry still in the journal, 0 if
// none: retention trims oldest first, so a trimmed newest means an empty
// subject.
func (j *Journal) lastLocked(subject string) uint64 {
	if seq := j.last[subject]; seq >= j.first {
		return seq
	}
	return 0
}

// KeepPerSubject is how many entries per subject Kept keeps, as the
// bus's keep stream does.
const KeepPerSubject = 8

// Trim drops the entries before first, as retention would: reads,
// consumers and fences no longer see them; Kept still has each guest's
// newest desired events, actions and results.
func (j *Journal) Trim(first uint64) {
	j.mu.Lock()
	j.first = max(j.first, first)
	j.mu.Unlock()
}

// firstSeq is where the journal starts (Trim).
func (j *Journal) firstSeq() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.first
}

// Kept implements journal.Kept like the bus's keep stream: the newest
// KeepPerSubject entries of each desired, action and result subject,
// trimmed or not, those in (after, before), in order.
func (j *Journal) Kept(_ context.Context, after, before uint64) ([]journal.Entry, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	seen := map[string]int{}
	var out []journal.Entry
	for i := len(j.entries) - 1; i >= 0; i-- {
		e := j.entries[i]
		k, _, _ := strings.Cut(strings.TrimPrefix(e.Subject, events.Prefix+"."), ".")
		switch events.Kind(k) {
		case events.KindDesired, events.KindAction, events.KindResult:
		default:
			continue
		}
		if seen[e.Subject]++; seen[e.Subject] > KeepPerSubject || e.Seq <= after || e.Seq >= before {
			continue
		}
		out = append(out, e)
	}
	slices.Reverse(out)
	return out, nil
}
