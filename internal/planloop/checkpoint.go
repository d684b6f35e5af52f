package planner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/goccy/go-json"
	"github.com/klauspost/compress/zstd"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/projector"
)

// CheckpointBucket is the object store holding planner checkpoints.
const CheckpointBucket = "converge_checkpoints"

// checkpointVersion changes whenever the projector's view layout does: an
// older checkpoint is then ignored and the journal folded from the start.
const checkpointVersion = 1

// Checkpoint is the planner's fold as of a stream sequence: a restarted
// planner loads it and folds only the events after Seq.
type Checkpoint struct {
	Version int    `json:"version"`
	Cluster string `json:"cluster"`
	Stream  string `json:"stream"`
	// StreamCreated tells a stream from one deleted and created again
	// under the same name, whose sequences mean other events.
	StreamCreated time.Time               `json:"stream_created"`
	Seq           uint64                  `json:"seq"`
	At            time.Time               `json:"at"`
	State         projector.ClusterState  `json:"state"`
	Views         map[int]*projector.View `json:"views"`
}

var (
	zstdMagic      = []byte{0x28, 0xb5, 0x2f, 0xfd}
	zstdEncoder, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	zstdDecoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
)

// CheckpointName is the object name of a cluster's checkpoint.
func CheckpointName(cluster string) string { return "planner-" + cluster }

// OpenCheckpoints creates or opens the checkpoint object store.
func OpenCheckpoints(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.ObjectStore, error) {
	os, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: CheckpointBucket,
		Description: "converge planner checkpoints", Replicas: max(replicas, 1), Storage: jetstream.FileStorage})
	if errors.Is(err, jetstream.ErrBucketExists) {
		os, err = js.ObjectStore(ctx, CheckpointBucket)
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoints: %w", err)
	}
	return os, nil
}

// snapshot copies the fold for encoding off the planning loop. Views are
// copied one level deep: the events they point to are never mutated after
// folding (projector.View.Clone).
func (s *Service) snapshot() *Checkpoint {
	views := make(map[int]*projector.View, len(s.proj.Views))
	for id, v := range s.proj.Views {
		views[id] = v.Clone()
	}
	return &Checkpoint{Version: checkpointVersion, Cluster: s.cfg.Cluster, Stream: s.bus.Config().Stream,
		StreamCreated: s.streamCreated, Seq: s.proj.LastSeq, At: s.now().UTC(), State: s.proj.State, Views: views}
}

// writeCheckpoint encodes and stores cp.
func (s *Service) writeCheckpoint(ctx context.Context, cp *Checkpoint) error {
	if s.ckpt == nil {
		return errors.New("no checkpoint store")
	}
	body, err := json.Marshal(cp)
	if err != nil {
		return fmt.Errorf("encode checkpoint: %w", err)
	}
	// Views repeat the same field names and values guest after guest:
	// compressed, a 10,000-guest checkpoint is a tenth of its JSON.
	packed := zstdEncoder.EncodeAll(body, nil)
	if _, err := s.ckpt.Put(ctx, jetstream.ObjectMeta{Name: CheckpointName(s.cfg.Cluster)}, bytes.NewReader(packed)); err != nil {
		return fmt.Errorf("store checkpoint: %w", err)
	}
	s.log.Info().Uint64("seq", cp.Seq).Int("guests", len(cp.Views)).Int("json_bytes", len(body)).Int("stored_bytes", len(packed)).
		Msg("checkpoint written")
	return nil
}

// loadCheckpoint returns the stored checkpoint if it can be resumed from
// on this stream: same cluster and stream, taken within the stream's
// current range (not from before a purge or retention cut, nor from a
// stream since recreated). nil means fold from the start.
func (s *Service) loadCheckpoint(ctx context.Context, info *jetstream.StreamInfo) *Checkpoint {
	if s.ckpt == nil {
		return nil
	}
	body, err := s.ckpt.GetBytes(ctx, CheckpointName(s.cfg.Cluster))
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		s.log.Info().Msg("no checkpoint; folding the journal from the start")
		return nil
	}
	if err != nil {
		s.log.Warn().Err(err).Msg("checkpoint unreadable; folding the journal from the start")
		return nil
	}
	if bytes.HasPrefix(body, zstdMagic) {
		if body, err = zstdDecoder.DecodeAll(body, nil); err != nil {
			s.log.Warn().Err(err).Msg("checkpoint undecompressable; folding the journal from the start")
			return nil
		}
	}
	var cp Checkpoint
	if err := json.Unmarshal(body, &cp); err != nil {
		s.log.Warn().Err(err).Msg("checkpoint undecodable; folding the journal from the start")
		return nil
	}
	why := ""
	switch {
	case cp.Version != checkpointVersion:
		why = fmt.Sprintf("version %d, want %d", cp.Version, checkpointVersion)
	case cp.Cluster != s.cfg.Cluster || cp.Stream != s.bus.Config().Stream:
		why = fmt.Sprintf("for cluster %q stream %q", cp.Cluster, cp.Stream)
	case !cp.StreamCreated.Equal(info.Created):
		why = fmt.Sprintf("of a stream created %s; this one was created %s", cp.StreamCreated.Format(time.RFC3339Nano), info.Created.Format(time.RFC3339Nano))
	case cp.Seq > info.State.LastSeq:
		why = fmt.Sprintf("at seq %d, beyond the stream's last %d (stream recreated?)", cp.Seq, info.State.LastSeq)
	case info.State.FirstSeq > cp.Seq+1 && info.State.Msgs > 0:
		// Events between the checkpoint and the stream's start are gone:
		// the tail alone would miss them. (Retention removing older
		// events is fine: the checkpoint already holds their effect.)
		why = fmt.Sprintf("at seq %d, but the stream now starts at %d", cp.Seq, info.State.FirstSeq)
	}
	if why != "" {
		s.log.Warn().Str("reason", why).Msg("checkpoint not usable; folding the journal from the start")
		return nil
	}
	for id, v := range cp.Views {
		if v == nil || v.VMID != id {
			s.log.Warn().Int("vmid", id).Msg("checkpoint holds an inconsistent view; folding the journal from the start")
			return nil
		}
	}
	return &cp
}
