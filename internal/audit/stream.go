package audit

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

var partitionRe = regexp.MustCompile(`\{\{\s*partition\(\s*(\d+)\s*,`)

// Partitions reads the partition count from the journal stream's subject
// transform: a client need not be told how the stream was created.
func Partitions(cfg jetstream.StreamConfig) (int, error) {
	if cfg.SubjectTransform == nil {
		return 0, fmt.Errorf("journal: stream %s has no subject transform; is it converge's journal?", cfg.Name)
	}
	m := partitionRe.FindStringSubmatch(cfg.SubjectTransform.Destination)
	if m == nil {
		return 0, fmt.Errorf("journal: stream %s: no partition in transform %q", cfg.Name, cfg.SubjectTransform.Destination)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n < 1 {
		return 0, fmt.Errorf("journal: stream %s: bad partition count in %q", cfg.Name, cfg.SubjectTransform.Destination)
	}
	return n, nil
}

// anySubject matches every stored subject: next_by_subj with it finds the
// first message at or after a sequence, skipping gaps.
const anySubject = ">"

// nextMsg returns the first stored message at or after seq, or nil.
func nextMsg(ctx context.Context, s jetstream.Stream, seq uint64) (*jetstream.RawStreamMsg, error) {
	m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(anySubject))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	return m, err
}

// seqAtTime is the last sequence within first..last stored at or before t,
// 0 if none: a binary search over direct gets (about log2(n) of them).
// Stream times grow with the sequence (the leader stamps each store).
func seqAtTime(ctx context.Context, s jetstream.Stream, t time.Time, first, last uint64) (uint64, error) {
	var found uint64
	lo, hi := first, last
	for lo <= hi && hi > 0 {
		mid := lo + (hi-lo)/2
		m, err := nextMsg(ctx, s, mid)
		if err != nil {
			return 0, fmt.Errorf("journal: read seq %d: %w", mid, err)
		}
		switch {
		case m == nil || m.Sequence > hi:
			hi = mid - 1
		case !m.Time.After(t):
			found, lo = m.Sequence, m.Sequence+1
		default:
			hi = mid - 1
		}
	}
	return found, nil
}

// target resolves a point to the last sequence to fold (0: nothing).
func target(ctx context.Context, s jetstream.Stream, st jetstream.StreamState, until Point) (uint64, error) {
	if st.Msgs == 0 {
		return 0, nil
	}
	last := st.LastSeq
	if until.Seq > 0 {
		last = min(last, until.Seq)
	}
	if !until.Time.IsZero() {
		return seqAtTime(ctx, s, until.Time, max(st.FirstSeq, 1), last)
	}
	if last < st.FirstSeq {
		return 0, nil
	}
	return last, nil
}

// EventTime is the stream time of the event with sequence seq.
func EventTime(ctx context.Context, js jetstream.JetStream, stream string, seq uint64) (time.Time, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return time.Time{}, fmt.Errorf("journal: stream %s: %w", stream, err)
	}
	m, err := s.GetMsg(ctx, seq)
	if err != nil {
		return time.Time{}, fmt.Errorf("journal: read seq %d: %w", seq, err)
	}
	return m.Time, nil
}
