package planloop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"
	"github.com/klauspost/compress/zstd"

	"github.com/converge-pve/converge/projector"
)

// Checkpoint is a planner's fold as of a journal sequence
// (projector.Snapshot) and which journal it is of: a restarted planner
// loads it and folds only the events after Seq. The snapshot records the
// signing settings it was folded under: under others the engine refuses
// it (projector.ErrSigningChanged) and the journal is folded from the
// start, so that turning --require-signed on judges every desired event.
type Checkpoint struct {
	projector.Snapshot
	Stream string `json:"stream"`
	// StreamCreated tells a stream from one deleted and created again
	// under the same name, whose sequences mean other events.
	StreamCreated time.Time `json:"stream_created"`
	At            time.Time `json:"at"`
}

var (
	zstdMagic      = []byte{0x28, 0xb5, 0x2f, 0xfd}
	zstdDecoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
)

// Checkpoints are JSON as encoding/json writes and reads it (stored ones
// were written so: a planner of any version resumes from them), under
// option sets built once. Decoding refuses a malformed checkpoint at its
// first fault rather than checking it whole first (a second pass over
// megabytes).
var (
	ckptEncode = jsonv1.DefaultOptionsV1()
	ckptDecode = json.JoinOptions(jsonv1.DefaultOptionsV1(), jsonv1.ReportErrorsWithLegacySemantics(false))
)

// CheckpointName is the object name of a cluster's checkpoint.
func CheckpointName(cluster string) string { return "planner-" + cluster }

// LeaseGroup is the lease group the planners of a cluster join.
func LeaseGroup(cluster string) string { return "planner-" + cluster }

// checkpoint writes a snapshot the engine handed out, off the loop; the
// outcome goes back to the engine through ckptErr.
func (l *Loop) checkpoint(ctx context.Context, s *projector.Snapshot) {
	l.ckptWG.Add(1)
	go func() {
		defer l.ckptWG.Done()
		err := l.writeCheckpoint(ctx, s)
		if err != nil && ctx.Err() == nil {
			l.log.Warn().Err(err).Msg("checkpoint not written; will retry")
		}
		l.ckptErr <- err
	}()
}

// writeCheckpoint encodes and stores a snapshot.
func (l *Loop) writeCheckpoint(ctx context.Context, s *projector.Snapshot) error {
	cp := Checkpoint{Snapshot: *s, Stream: l.cfg.Stream, StreamCreated: l.stream.Created, At: l.clk.Now().UTC()}
	packed, err := encodeCheckpoint(&cp)
	if err != nil {
		return fmt.Errorf("encode checkpoint: %w", err)
	}
	if err := l.ckpts.Put(ctx, CheckpointName(l.eng.Config().Cluster), packed); err != nil {
		return fmt.Errorf("store checkpoint: %w", err)
	}
	l.log.Info().Uint64("seq", cp.Seq).Int("guests", len(cp.Views)).Int("stored_bytes", len(packed)).
		Msg("checkpoint written")
	return nil
}

// encodeCheckpoint is a checkpoint as stored: JSON, zstd-compressed
// (views repeat the same field names and values guest after guest:
// compressed, a 10,000-guest checkpoint is a tenth of its JSON). The
// JSON is streamed into the compressor view by view, never held whole:
// at 100,000 guests, marshalled at once it was 4.2 s of CPU and 2.2 GB
// allocated every CheckpointInterval (BenchmarkCheckpointEncode), which
// the pipeline paid in garbage collections.
func encodeCheckpoint(cp *Checkpoint) ([]byte, error) {
	head := *cp
	head.Views = nil
	hb, err := json.Marshal(head, ckptEncode)
	if err != nil {
		return nil, err
	}
	// The views' place: the only "views":null (inside a string its quotes
	// would be escaped).
	at := bytes.Index(hb, viewsNull)
	if at < 0 {
		return nil, errors.New("no views field in a checkpoint's JSON")
	}
	ids := make([]int, 0, len(cp.Views))
	for id := range cp.Views {
		ids = append(ids, id)
	}
	slices.Sort(ids)

	zstdStream.mu.Lock()
	defer zstdStream.mu.Unlock()
	var out bytes.Buffer
	zw := zstdStream.w
	zw.Reset(&out)
	_, _ = zw.Write(hb[:at])
	_, _ = zw.Write([]byte(`"views":{`))
	num := make([]byte, 0, 24)
	for i, id := range ids {
		num = append(num[:0], ',', '"')
		if i == 0 {
			num = num[1:]
		}
		num = append(strconv.AppendInt(num, int64(id), 10), '"', ':')
		if _, err := zw.Write(num); err != nil {
			return nil, err
		}
		if err := json.MarshalWrite(zw, cp.Views[id], ckptEncode); err != nil {
			return nil, fmt.Errorf("view of %d: %w", id, err)
		}
	}
	_, _ = zw.Write([]byte{'}'})
	if _, err := zw.Write(hb[at+len(viewsNull):]); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

var viewsNull = []byte(`"views":null`)

// zstdStream is the streaming compressor of checkpoints, one at a time.
var zstdStream = struct {
	mu sync.Mutex
	w  *zstd.Encoder
}{w: func() *zstd.Encoder {
	w, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	return w
}()}

// loadCheckpoint returns the stored checkpoint if it can be resumed from
// on this journal: same cluster and stream, not beyond the stream's end,
// not from a stream since recreated. nil means fold from the start.
func (l *Loop) loadCheckpoint(ctx context.Context) *Checkpoint {
	if !l.ckptOK {
		return nil
	}
	body, err := l.ckpts.Get(ctx, CheckpointName(l.eng.Config().Cluster))
	switch {
	case err != nil:
		l.log.Warn().Err(err).Msg("checkpoint unreadable; folding the journal from the start")
		return nil
	case body == nil:
		l.log.Info().Msg("no checkpoint; folding the journal from the start")
		return nil
	}
	cp, why := decodeCheckpoint(body)
	if why == "" {
		why = l.usable(cp)
	}
	if why != "" {
		l.log.Warn().Str("reason", why).Msg("checkpoint not usable; folding the journal from the start")
		return nil
	}
	return cp
}

// decodeCheckpoint reads a stored checkpoint (zstd-compressed JSON, or
// plain JSON from before compression); why says what is wrong with it.
func decodeCheckpoint(body []byte) (cp *Checkpoint, why string) {
	if bytes.HasPrefix(body, zstdMagic) {
		var err error
		if body, err = zstdDecoder.DecodeAll(body, nil); err != nil {
			return nil, "undecompressable: " + err.Error()
		}
	}
	cp = &Checkpoint{}
	if err := json.Unmarshal(body, cp, ckptDecode); err != nil {
		return nil, "undecodable: " + err.Error()
	}
	return cp, ""
}

// usable says why a checkpoint cannot be resumed from on this journal, ""
// if it can. A stream that now starts after cp.Seq+1 is fine: retention
// dropped events the tail misses, and foldKept folds what the journal
// keeps of them (every guest's newest desired events, actions and
// results), as a fold from the start does.
func (l *Loop) usable(cp *Checkpoint) string {
	info, cluster := l.stream, l.eng.Config().Cluster
	switch {
	case cp.Version != projector.SnapshotVersion:
		return fmt.Sprintf("version %d, want %d", cp.Version, projector.SnapshotVersion)
	case cp.Cluster != cluster || cp.Stream != l.cfg.Stream:
		return fmt.Sprintf("for cluster %q stream %q", cp.Cluster, cp.Stream)
	case !cp.StreamCreated.Equal(info.Created):
		return fmt.Sprintf("of a stream created %s; this one was created %s", cp.StreamCreated.Format(time.RFC3339Nano), info.Created.Format(time.RFC3339Nano))
	case cp.Seq > info.LastSeq:
		return fmt.Sprintf("at seq %d, beyond the stream's last %d (stream recreated?)", cp.Seq, info.LastSeq)
	}
	for id, v := range cp.Views {
		if v == nil || v.VMID != id {
			return fmt.Sprintf("inconsistent view for vmid %d", id)
		}
	}
	return ""
}

// foldKept folds what the journal's retention dropped between the fold's
// start (the checkpoint, or nothing) and the journal's first entry, as
// far as the journal keeps it: every guest's newest desired events,
// actions and results, under their own sequences. It returns where to
// follow the journal from. A journal retention has cut may be at its
// limit, dropping its oldest entries while the feed reads them: the kept
// entries after its first are held for bridge.
func (l *Loop) foldKept(ctx context.Context) (after uint64, err error) {
	from, info := l.eng.LastSeq(), l.stream
	if info.FirstSeq <= 1 || info.LastSeq <= from {
		return from, nil
	}
	es, err := l.j.Kept(ctx, from, info.LastSeq+1)
	if err != nil {
		return 0, fmt.Errorf("planner: kept entries: %w", err)
	}
	n := 0
	for n < len(es) && es[n].Seq < info.FirstSeq {
		n++
	}
	if len(es) > n {
		l.ahead = es[n:]
	}
	if info.FirstSeq <= from+1 {
		return from, nil
	}
	evs := make([]projector.Event, n)
	for i, e := range es[:n] {
		evs[i] = event(e)
	}
	l.eng.Fold(evs, 0, l.clk.Now())
	l.metrics.folded.Add(float64(len(evs)))
	ev := l.log.Info().Uint64("after", from).Uint64("journal_first", info.FirstSeq).Int("recovered", len(evs))
	if len(evs) == 0 {
		// Also a journal without limits (and so without a keep stream)
		// whose oldest entries were expired observations and heartbeats.
		ev.Msg("the journal starts after what the fold has seen; the keep stream holds nothing of the gap")
	} else {
		ev.Msg("journal retention dropped events the fold needs; folded what the keep stream holds of them")
	}
	return info.FirstSeq - 1, nil
}

// bridge appends to batch the kept entries the feed skipped before seq
// (retention dropped them before the feed read them), and forgets those
// it passed.
func (l *Loop) bridge(batch []projector.Event, seq uint64) []projector.Event {
	for len(l.ahead) > 0 && l.ahead[0].Seq <= seq {
		if k := l.ahead[0]; k.Seq < seq {
			batch = append(batch, event(k))
			l.bridged++
		}
		l.ahead = l.ahead[1:]
		if len(l.ahead) == 0 {
			l.ahead = nil
			if l.bridged > 0 {
				l.log.Info().Int("recovered", l.bridged).Msg("journal retention dropped events before the planner read them; folded what the keep stream holds of them")
			}
		}
	}
	return batch
}
