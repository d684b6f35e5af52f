package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
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
		m.mu.Lock()
		ch := m.pending[id]
		m.mu.Unlock()
		if ch != nil {
			select {
			case ch <- msg:
			default: // more answers than asked for: not ours to wait on
			}
		}
	})
	if err != nil {
		return err
	}
	m.sub, m.prefix = sub, prefix
	return nil
}

func (m *lastsMux) register(capacity int) (uint64, chan *nats.Msg) {
	ch := make(chan *nats.Msg, capacity)
	m.mu.Lock()
	m.next++
	id := m.next
	m.pending[id] = ch
	m.mu.Unlock()
	return id, ch
}

func (m *lastsMux) unregister(id uint64) {
	m.mu.Lock()
	delete(m.pending, id)
	m.mu.Unlock()
}

// LastMsgs reads the newest stored message of each subject (literal stored
// subjects) in one request, a batched direct get ("multi_last"): one round
// trip and one consistent view of the stream instead of one read per
// subject. Subjects without a message are absent from the result. It
// returns ErrBatchGetUnsupported when the server cannot answer it.
func (b *Bus) LastMsgs(ctx context.Context, subjects []string) (map[string]*jetstream.RawStreamMsg, error) {
	if b.lasts == nil || len(subjects) == 0 {
		return nil, ErrBatchGetUnsupported
	}
	if err := b.lasts.start(b.NC); err != nil {
		return nil, fmt.Errorf("bus: batched reads: %w", err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultGetTimeout)
		defer cancel()
	}
	req, err := json.Marshal(struct {
		MultiLast []string `json:"multi_last"`
		Batch     int      `json:"batch"`
	}{subjects, len(subjects)})
	if err != nil {
		return nil, err
	}
	// Each subject's message and the end-of-batch marker.
	id, ch := b.lasts.register(len(subjects) + 1)
	defer b.lasts.unregister(id)
	b.lasts.mu.Lock()
	reply := b.lasts.prefix + strconv.FormatUint(id, 10)
	b.lasts.mu.Unlock()
	if err := b.NC.PublishRequest("$JS.API.DIRECT.GET."+b.cfg.Stream, reply, req); err != nil {
		return nil, fmt.Errorf("bus: batched read: %w", err)
	}
	out := make(map[string]*jetstream.RawStreamMsg, len(subjects))
	for {
		var msg *nats.Msg
		select {
		case msg = <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("bus: batched read: %w", ctx.Err())
		}
		// nats.go puts an inline status ("NATS/1.0 204 EOB") in these.
		status, desc := msg.Header.Get("Status"), msg.Header.Get("Description")
		switch {
		case status == "":
			m, err := rawStreamMsg(msg)
			if err != nil {
				return nil, err
			}
			out[m.Subject] = m
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

// rawStreamMsg reads a direct get's answer as nats.go's jetstream does.
func rawStreamMsg(msg *nats.Msg) (*jetstream.RawStreamMsg, error) {
	subj := msg.Header.Get(jetstream.SubjectHeader)
	seq, err := strconv.ParseUint(msg.Header.Get(jetstream.SequenceHeader), 10, 64)
	if subj == "" || err != nil {
		return nil, fmt.Errorf("bus: batched read: answer without subject or sequence (%q, %q)", subj, msg.Header.Get(jetstream.SequenceHeader))
	}
	ts, err := time.Parse(time.RFC3339Nano, msg.Header.Get(jetstream.TimeStampHeaer))
	if err != nil {
		return nil, fmt.Errorf("bus: batched read of %s: time stamp: %w", subj, err)
	}
	return &jetstream.RawStreamMsg{Subject: subj, Sequence: seq, Header: msg.Header, Data: msg.Data, Time: ts}, nil
}
