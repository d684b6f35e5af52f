package bus

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/journal"
)

// ErrBatchGetUnsupported is LastMsgs' answer when the server does not
// answer batched direct gets (nats-server before 2.11, or a stream without
// direct gets): callers read the subjects one by one instead.
var ErrBatchGetUnsupported = errors.New("bus: the server does not answer batched reads of last messages")

// defaultGetTimeout bounds a LastMsgs without a deadline, as nats.go's
// jetstream bounds its own reads.
const defaultGetTimeout = 5 * time.Second

// lastsMux routes the answers of LastMsgs requests: one wildcard inbox
// subscription per connection, one reply subject per request.
type lastsMux struct {
	// unsupported: the server does not batch direct gets; Lasts reads
	// one subject at a time.
	unsupported atomic.Bool

	mu      sync.Mutex
	sub     *nats.Subscription // nil until a subscription succeeds
	prefix  string
	next    uint64
	pending map[uint64]chan *nats.Msg
	free    sync.Pool // answer channels of lastsChanCap, drained
}

// start subscribes the inbox once; a failed attempt is tried again by the
// next request rather than remembered.
func (m *lastsMux) start(nc *nats.Conn) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sub != nil {
		return nil
	}
	if m.pending == nil {
		m.pending = map[uint64]chan *nats.Msg{}
	}
	prefix := nc.NewInbox() + "."
	sub, err := nc.Subscribe(prefix+"*", func(msg *nats.Msg) {
		id, err := strconv.ParseUint(msg.Subject[len(prefix):], 10, 64)
		if err != nil {
			return
		}
		// Sent under the lock: once unregistered, a channel gets nothing
		// more, and is reused.
		m.mu.Lock()
		if ch := m.pending[id]; ch != nil {
			select {
			case ch <- msg:
			default: // more answers than asked for: not ours to wait on
			}
		}
		m.mu.Unlock()
	})
	if err != nil {
		return err
	}
	m.sub, m.prefix = sub, prefix
	return nil
}

// lastsChanCap is the capacity of the pooled answer channels: a guest's
// four kinds and the end-of-batch marker, with room to spare.
const lastsChanCap = 8

func (m *lastsMux) register(capacity int) (uint64, chan *nats.Msg) {
	var ch chan *nats.Msg
	if capacity <= lastsChanCap {
		ch, _ = m.free.Get().(chan *nats.Msg)
	}
	if ch == nil {
		ch = make(chan *nats.Msg, max(capacity, lastsChanCap))
	}
	m.mu.Lock()
	m.next++
	id := m.next
	m.pending[id] = ch
	m.mu.Unlock()
	return id, ch
}

func (m *lastsMux) unregister(id uint64, ch chan *nats.Msg) {
	m.mu.Lock()
	delete(m.pending, id)
	m.mu.Unlock()
	for len(ch) > 0 { // answers past the end of the batch
		<-ch
	}
	if cap(ch) == lastsChanCap {
		m.free.Put(ch)
	}
}

// LastMsgs reads the newest stored message of each subject (literal stored
// subjects) in one request, a batched direct get ("multi_last"): one round
// trip and one consistent view of the stream instead of one read per
// subject. Subjects without a message are absent from the result. It
// returns ErrBatchGetUnsupported when the server cannot answer it.
func (b *Bus) LastMsgs(ctx context.Context, subjects []string) (map[string]*jetstream.RawStreamMsg, error) {
	es, err := b.lastEntries(ctx, subjects)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*jetstream.RawStreamMsg, len(subjects))
	for _, e := range es {
		if e != nil {
			out[e.Subject] = &jetstream.RawStreamMsg{Subject: e.Subject, Sequence: e.Seq, Header: nats.Header(e.Header), Data: e.Data, Time: e.Time}
		}
	}
	return out, nil
}

// lastEntries is LastMsgs as journal entries, in the order of subjects,
// nil where a subject has none.
func (b *Bus) lastEntries(ctx context.Context, subjects []string) ([]*journal.Entry, error) {
	if b.lasts == nil || len(subjects) == 0 {
		return nil, ErrBatchGetUnsupported
	}
	if err := b.lasts.start(b.NC); err != nil {
		return nil, fmt.Errorf("bus: batched reads: %w", err)
	}
	// A pooled timer rather than a context with a timeout: this read is
	// on every action's path, and the context would cost a dozen
	// allocations.
	var timeout <-chan time.Time
	if _, ok := ctx.Deadline(); !ok {
		t := getTimer()
		defer putTimer(t)
		timeout = t.C
	}
	req, err := multiLastRequest(subjects)
	if err != nil {
		return nil, err
	}
	// Each subject's message and the end-of-batch marker.
	id, ch := b.lasts.register(len(subjects) + 1)
	defer b.lasts.unregister(id, ch)
	reply := b.lasts.prefix + strconv.FormatUint(id, 10)
	if err := b.NC.PublishRequest("$JS.API.DIRECT.GET."+b.cfg.Stream, reply, req); err != nil {
		return nil, fmt.Errorf("bus: batched read: %w", err)
	}
	out := make([]*journal.Entry, len(subjects))
	for {
		var msg *nats.Msg
		select {
		case msg = <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("bus: batched read: %w", ctx.Err())
		case <-timeout:
			return nil, fmt.Errorf("bus: batched read: %w", context.DeadlineExceeded)
		}
		// nats.go puts an inline status ("NATS/1.0 204 EOB") in these.
		status, desc := msg.Header.Get("Status"), msg.Header.Get("Description")
		switch {
		case status == "":
			e, err := directEntry(msg)
			if err != nil {
				return nil, err
			}
			for i, s := range subjects {
				if s == e.Subject {
					out[i] = e
				}
			}
		case status == "204": // end of batch
			return out, nil
		case status == "404" && desc == "No Results":
			return out, nil
		case status == "503", status == "408" && (desc == "Empty Request" || desc == "Bad Request"):
			// No direct-get responder, or a server that ignores multi_last.
			return nil, ErrBatchGetUnsupported
		default:
			return nil, fmt.Errorf("bus: batched read: %s %s", status, desc)
		}
	}
}

// multiLastRequest is the body of a batched direct get of subjects,
// written by hand when they are plain (converge's own are) and by
// encoding/json otherwise.
func multiLastRequest(subjects []string) ([]byte, error) {
	n := 32
	for _, s := range subjects {
		if strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r > '~' || r == '"' || r == '\\' }) {
			return json.Marshal(struct {
				MultiLast []string `json:"multi_last"`
				Batch     int      `json:"batch"`
			}{subjects, len(subjects)})
		}
		n += len(s) + 3
	}
	req := append(make([]byte, 0, n), `{"multi_last":[`...)
	for i, s := range subjects {
		if i > 0 {
			req = append(req, ',')
		}
		req = append(append(append(req, '"'), s...), '"')
	}
	req = append(req, `],"batch":`...)
	req = strconv.AppendInt(req, int64(len(subjects)), 10)
	return append(req, '}'), nil
}

// directEntry reads a direct get's answer as a journal entry, as
// nats.go's jetstream reads it.
func directEntry(msg *nats.Msg) (*journal.Entry, error) {
	subj := msg.Header.Get(jetstream.SubjectHeader)
	seq, err := strconv.ParseUint(msg.Header.Get(jetstream.SequenceHeader), 10, 64)
	if subj == "" || err != nil {
		return nil, fmt.Errorf("bus: batched read: answer without subject or sequence (%q, %q)", subj, msg.Header.Get(jetstream.SequenceHeader))
	}
	ts, err := time.Parse(time.RFC3339Nano, msg.Header.Get(jetstream.TimeStampHeaer))
	if err != nil {
		return nil, fmt.Errorf("bus: batched read of %s: time stamp: %w", subj, err)
	}
	return &journal.Entry{Seq: seq, Subject: subj, Header: events.Header(msg.Header), Data: msg.Data, Time: ts}, nil
}

// getTimers are stopped timers of lastEntries' default timeout.
var getTimers sync.Pool

// getTimer returns a timer running for defaultGetTimeout. Since Go 1.23 a
// stopped timer's channel holds no stale value, so a pooled one can be
// Reset.
func getTimer() *time.Timer {
	if t, ok := getTimers.Get().(*time.Timer); ok {
		t.Reset(defaultGetTimeout)
		return t
	}
	return time.NewTimer(defaultGetTimeout)
}

func putTimer(t *time.Timer) {
	if !t.Stop() {
		// Only under GODEBUG=asynctimerchan=1 can a fired timer's value
		// still wait in C: drained, so that its next user does not read it.
		select {
		case <-t.C:
		default:
		}
	}
	getTimers.Put(t)
}
