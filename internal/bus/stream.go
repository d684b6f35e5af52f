package bus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/events"
)

// StreamConfig is the journal stream's configuration for this Config.
func (b *Bus) StreamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        b.cfg.Stream,
		Description: "converge journal: desired, observed, action, result, heartbeat and control events",
		Subjects:    JournalSubjects(),
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    b.cfg.Replicas,
		MaxAge:      b.cfg.MaxAge,
		MaxBytes:    nonZero(b.cfg.MaxBytes),
		Discard:     jetstream.DiscardOld,
		// The dedupe window covers blind publish retries; planner idempotence
		// beyond it comes from fenced publishes, not from msg-ids.
		Duplicates:  2 * time.Minute,
		AllowDirect: true,
		DenyDelete:  true,
		// Per-message TTLs: observed snapshots and heartbeats carry a
		// shorter term than the audit trail (Config.ObservedTTL).
		AllowMsgTTL: true,
		SubjectTransform: &jetstream.SubjectTransformConfig{
			Source:      events.Prefix + ".*.*.*",
			Destination: events.Prefix + ".{{wildcard(1)}}.{{wildcard(2)}}.{{wildcard(3)}}.{{partition(" + strconv.Itoa(b.cfg.Partitions) + ",2,3)}}",
		},
	}
}

// JournalSubjects are the subjects the journal takes: exactly the shapes
// converge publishes, pve.<kind>.<cluster>.<vmid> for guests' events (the
// transform stores them with their partition) and pve.<kind>.<cluster>
// for heartbeats and control requests. Anything else (a five-token
// subject that would skip the transform, an unknown kind) finds no
// stream: its publisher gets an error and nothing is folded. Provision
// narrows the catch-all pve.> of journals created before.
func JournalSubjects() []string {
	var s []string
	for _, k := range []events.Kind{events.KindDesired, events.KindObserved, events.KindAction, events.KindResult, events.KindAddresses} {
		s = append(s, events.Prefix+"."+string(k)+".*.*")
	}
	for _, k := range []events.Kind{events.KindHeartbeat, events.KindControl} {
		s = append(s, events.Prefix+"."+string(k)+".*")
	}
	return s
}

func nonZero(n int64) int64 {
	if n <= 0 {
		return -1
	}
	return n
}

// ConsumeHeartbeat is the idle heartbeat every long-lived pull consumer
// (planner, executors, replays, timelines, bench) asks for. A
// pull consumer learns that the server no longer holds its pull request
// only when two heartbeats go missing, and then pulls again (an ordered
// consumer recreates itself at its cursor). nats.go's defaults (5 s for an
// ordered consumer, half the 30 s expiry for a durable one) made such a
// loss stall a consumer for 10–30 s: the bench saw it about once in ten
// runs, with messages pending and no request waiting on the server. The
// cost is two small messages a second per idle consumer; a handler that
// blocks longer than two heartbeats costs a spare pull request (an
// ordered consumer: its re-creation at the cursor, which loses nothing).
const ConsumeHeartbeat = time.Second

// Provisioning on a cluster waits for Raft: creating a replicated stream
// or bucket returns once its group has elected a leader, and a cluster that
// has just formed (or lost a node) answers "temporarily unavailable" or not
// at all for seconds. Every role provisions at start, concurrently.
const (
	provisionAttempt  = 5 * time.Second
	provisionPatience = 2 * time.Minute
)

// Provision creates or updates the journal stream, its keep stream when
// the journal has retention limits, and the views bucket. It is
// idempotent; it refuses to change the partition count of an existing
// stream, which would move guests between partitions. Transient failures
// (timeouts, 503s of a cluster without leaders) are retried for up to two
// minutes or until ctx ends; the rest, such as a replica count larger
// than the cluster, may be among them and show in the warnings. New
// limits on an existing journal wait, for as long as the keep stream
// makes progress copying it, until it has copied everything they could
// drop (KeepBehindError).
func (b *Bus) Provision(ctx context.Context) error {
	patience := time.Now().Add(provisionPatience)
	delay := 250 * time.Millisecond
	var p provisioning
	var kept uint64
	for attempt := 1; ; attempt++ {
		b.denied.clear()
		actx, acancel := context.WithTimeout(ctx, provisionAttempt)
		err := b.provision(actx, &p)
		acancel()
		var behind *KeepBehindError
		switch {
		case err == nil || ctx.Err() != nil:
			return err
		case errors.As(err, &behind):
			if behind.Kept > kept { // progress: patience again
				kept, patience = behind.Kept, time.Now().Add(provisionPatience)
			}
			b.log.Info().Uint64("kept", behind.Kept).Uint64("target", behind.Target).Str("keep_source", behind.Source).
				Msg("the keep stream is copying the journal; its retention limits apply once it has")
		case b.denied.last() != "":
			// Refused, not slow: NATS answers a denied request with an
			// asynchronous error and no reply, which looks like a timeout.
			return fmt.Errorf("bus: NATS refused this user %s: the roles of a deployment that may not create or change streams (deploy/nats) need "+
				"`converge provision` run as the admin user with the journal's settings (--replicas, --retention-age, --retention-bytes), and the same settings themselves: %w",
				b.denied.last(), err)
		case !IsTransient(err):
			return err
		default:
			b.log.Warn().Err(err).Int("attempt", attempt).Int("replicas", b.cfg.Replicas).
				Msg("provisioning the journal failed; retrying (is the NATS cluster still electing leaders?)")
		}
		if time.Now().After(patience) {
			if behind != nil {
				return fmt.Errorf("bus: gave up waiting %s for the keep stream to copy the journal, without progress (%w; its source: %s)",
					provisionPatience, err, behind.Source)
			}
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}

// IsTransient reports errors that a later attempt may not meet: timeouts
// and JetStream's 503s (a cluster without a meta or stream leader for the
// moment, too few peers online). Not-enabled errors are not among them.
func IsTransient(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) {
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case jetstream.JSErrCodeJetStreamNotEnabled, jetstream.JSErrCodeJetStreamNotEnabledForAccount:
			return false
		}
		return apiErr.Code == 503 // e.g. 10008 cluster temporarily unavailable, 10023 insufficient resources
	}
	return false
}

// apiAttempt bounds one JetStream API request made under a caller's
// longer deadline: a request a cluster drops while it fails over (its
// stream leader not yet known where the request lands, nats-server#4519)
// gets no answer at all, and would otherwise hold the caller, such as
// `converge wait --timeout 2m`, until its whole deadline.
const apiAttempt = 5 * time.Second

// attempts runs fn, each time with at most each (apiAttempt), again after a
// transient failure (IsTransient) until it succeeds, fails otherwise or
// ctx ends; retrying, if set, hears of each failure retried. fn must be
// a request with nothing left running when it returns (its context ends
// then).
func attempts(ctx context.Context, each time.Duration, fn func(context.Context) error, retrying func(err error, delay time.Duration)) error {
	delay := 100 * time.Millisecond
	for {
		actx, cancel := context.WithTimeout(ctx, each)
		err := fn(actx)
		cancel()
		if err == nil || ctx.Err() != nil || !IsTransient(err) {
			return err
		}
		if retrying != nil {
			retrying(err, delay)
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}

// provisioning is what Provision's attempts share.
type provisioning struct {
	// target is the journal sequence the keep stream must have copied
	// before new limits apply: the journal's newest desired event, action
	// or result when the wait began. It is fixed then: traffic arriving
	// meanwhile must not keep it out of reach, and the keep stream copies
	// in order, so what comes later follows within moments, as it does
	// once the limits apply.
	target uint64
}

func (b *Bus) provision(ctx context.Context, p *provisioning) error {
	want := b.StreamConfig()
	s, err := b.JS.Stream(ctx, want.Name)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		// Created without limits, which are applied below once the keep
		// stream sources it: nothing is dropped before it can copy it,
		// whatever publishes meanwhile and even if it cannot be made.
		first := want
		first.MaxAge, first.MaxBytes = 0, -1
		if s, err = b.JS.CreateStream(ctx, first); err != nil {
			return fmt.Errorf("bus: create stream %s: %w", want.Name, err)
		}
	case err != nil:
		return fmt.Errorf("bus: stream %s: %w", want.Name, err)
	}
	have := s.CachedInfo().Config
	if have.SubjectTransform == nil || have.SubjectTransform.Destination != want.SubjectTransform.Destination {
		return fmt.Errorf("bus: stream %s exists with transform %+v; converge wants %q (partitions are fixed at creation)",
			want.Name, have.SubjectTransform, want.SubjectTransform.Destination)
	}
	if b.cfg.LimitsUnset {
		want.MaxAge, want.MaxBytes = have.MaxAge, have.MaxBytes
	}
	if err := b.provisionKeep(ctx, limited(have) || limited(want)); err != nil {
		return err
	}
	// An unchanged stream is left alone: on a cluster an update is a Raft
	// proposal, and every role of every instance provisions at start.
	if !sameStream(have, want) {
		if limited(want) && (have.MaxAge != want.MaxAge || have.MaxBytes != want.MaxBytes) {
			if err := b.keepCaughtUp(ctx, s, p); err != nil {
				return err
			}
		}
		if limited(have) && !limited(want) {
			b.log.Warn().Dur("max_age", have.MaxAge).Int64("max_bytes", have.MaxBytes).
				Msg("removing the journal's retention limits: this process was given none (--retention-age, --retention-bytes)")
		}
		if _, err := b.JS.UpdateStream(ctx, want); err != nil {
			return fmt.Errorf("bus: update stream %s: %w", want.Name, err)
		}
	}
	return b.ProvisionViews(ctx)
}

// ProvisionViews creates or updates the views bucket alone, leaving the
// journal stream as it is (converge rebuild, a planner whose bucket was
// dropped).
func (b *Bus) ProvisionViews(ctx context.Context) error {
	kcfg := b.bucketConfig()
	if kv, err := b.JS.KeyValue(ctx, kcfg.Bucket); err == nil {
		if st, err := kv.Status(ctx); err == nil && sameBucket(st, kcfg) {
			return nil
		}
	}
	if _, err := b.JS.CreateOrUpdateKeyValue(ctx, kcfg); err != nil {
		return fmt.Errorf("bus: bucket %s: %w", b.cfg.Bucket, err)
	}
	return nil
}

func (b *Bus) bucketConfig() jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:      b.cfg.Bucket,
		Description: "converge per-guest views, materialised from the journal",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    b.cfg.Replicas,
	}
}

// sameStream compares the fields StreamConfig sets.
func sameStream(have, want jetstream.StreamConfig) bool {
	return have.Description == want.Description && slices.Equal(have.Subjects, want.Subjects) &&
		have.Retention == want.Retention && have.Storage == want.Storage && have.Replicas == want.Replicas &&
		have.MaxAge == want.MaxAge && have.MaxBytes == want.MaxBytes && have.Discard == want.Discard &&
		have.Duplicates == want.Duplicates && have.AllowDirect == want.AllowDirect && have.DenyDelete == want.DenyDelete && have.AllowMsgTTL == want.AllowMsgTTL &&
		have.SubjectTransform != nil && *have.SubjectTransform == *want.SubjectTransform
}

func sameBucket(st jetstream.KeyValueStatus, want jetstream.KeyValueConfig) bool {
	bs, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok {
		return false
	}
	have := bs.StreamInfo().Config
	return st.History() == int64(want.History) && have.Description == want.Description &&
		have.Storage == want.Storage && have.Replicas == want.Replicas
}

// Stream returns the journal stream handle.
func (b *Bus) Stream(ctx context.Context) (jetstream.Stream, error) {
	return b.JS.Stream(ctx, b.cfg.Stream)
}

// WaitStream returns the journal stream handle with its info, waiting
// through transient failures (a NATS cluster electing leaders after a
// crash) until ctx ends: a role starting then waits instead of exiting.
func (b *Bus) WaitStream(ctx context.Context) (jetstream.Stream, *jetstream.StreamInfo, error) {
	var s jetstream.Stream
	var info *jetstream.StreamInfo
	err := attempts(ctx, provisionAttempt, func(actx context.Context) (err error) {
		if s, err = b.Stream(actx); err == nil {
			info, err = s.Info(actx)
		}
		return err
	}, func(err error, delay time.Duration) {
		b.log.Warn().Err(err).Dur("retry_in", delay).Msg("journal stream unavailable; retrying")
	})
	if err != nil {
		return nil, nil, err
	}
	return s, info, nil
}

// Views returns the views bucket.
func (b *Bus) Views(ctx context.Context) (jetstream.KeyValue, error) {
	return b.JS.KeyValue(ctx, b.cfg.Bucket)
}

// Publish writes an event and waits for the stream's acknowledgement, for
// as long as ctx allows (5 s if it has no deadline).
//
// While a replicated stream has no leader (seconds, after its leader's node
// is lost) nats-server answers "no responders": only the leader subscribes
// to the stream's subjects. Publish retries those until ctx ends; nothing
// was stored, so the retry cannot duplicate. Any other error, a timeout
// above all, leaves it unknown whether the event was stored: callers retry
// with a Nats-Msg-Id (jetstream.WithMsgID or the header) so that the
// stream's dedupe window drops the second copy, or publish events that
// are harmless twice.
//
// A publish NATS refuses (the user's role may not publish to subject)
// fails at once with a *PermissionError rather than waiting out ctx.
func (b *Bus) Publish(ctx context.Context, subject string, body []byte, hdr nats.Header, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	msg := &nats.Msg{Subject: subject, Data: body, Header: hdr}
	if len(opts) > 0 {
		// Caller options come last, so they can override these.
		opts = append(slices.Clip(publishRetries), opts...)
	} else {
		opts = publishRetries
	}
	wctx, done := b.denied.watch(ctx, subject)
	defer done()
	ack, err := b.JS.PublishMsg(wctx, msg, opts...)
	return ack, refused(wctx, err)
}

// publishRetries are Publish's retries while no stream answers, made once.
var publishRetries = []jetstream.PublishOpt{jetstream.WithRetryAttempts(1 << 20), jetstream.WithRetryWait(noResponderWait)}

// StoredSubject is the literal stored subject of a guest's events.
func (b *Bus) StoredSubject(kind events.Kind, cluster string, vmid int) string {
	return events.StoredSubject(kind, cluster, vmid, b.cfg.Partitions)
}

// LastMsg reads the newest stored event of a guest of one kind, or nil if
// there is none.
func (b *Bus) LastMsg(ctx context.Context, kind events.Kind, cluster string, vmid int) (*jetstream.RawStreamMsg, error) {
	s, err := b.Stream(ctx)
	if err != nil {
		return nil, err
	}
	m, err := s.GetLastMsgForSubject(ctx, b.StoredSubject(kind, cluster, vmid))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	return m, err
}

// IsWrongLastSequence reports a failed optimistic-concurrency publish:
// 10071 on R1 streams, 10164 on replicated ones.
func IsWrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == 10164
	}
	return false
}
