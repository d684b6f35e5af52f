package journal

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/converge-pve/converge/events"
)

// Entry is one event as the journal stores it.
type Entry struct {
	Seq     uint64
	Subject string // stored form: pve.<kind>.<cluster>.<vmid>.<partition>
	Header  events.Header
	Data    []byte
	// Time is the stream's store time.
	Time time.Time
	// Pending is, for an entry delivered by a Feed, how many entries the
	// journal held after it then (0 when unknown or read directly).
	Pending uint64
}

// Info is the journal's extent.
type Info struct {
	FirstSeq, LastSeq, Msgs uint64
	// Created tells a stream from one deleted and created again under the
	// same name, whose sequences mean other events.
	Created time.Time
}

// Expect are a publish's preconditions.
type Expect struct {
	// MsgID makes a repeat within the stream's dedupe window a duplicate.
	MsgID string
	// Fenced: the subject's newest entry must still be LastSubjectSeq (0:
	// the subject must have none).
	Fenced         bool
	LastSubjectSeq uint64
	// TTL, if set, is how long the journal keeps the entry.
	TTL time.Duration
}

// FencedAt is the Expect of a publish fenced at seq.
func FencedAt(seq uint64) Expect { return Expect{Fenced: true, LastSubjectSeq: seq} }

// Ack is the journal's acknowledgement of a publish.
type Ack struct {
	Seq       uint64
	Duplicate bool
}

// ErrFenced is a publish refused by its fence: the subject moved on.
var ErrFenced = errors.New("journal: fenced: the subject has a newer entry")

// ErrNotPermitted is a write the journal refuses its writer for lack of
// permission (a NATS user whose role may not publish there): retrying
// cannot help.
var ErrNotPermitted = errors.New("journal: not permitted")

// ErrStale is a compare-and-set write refused because the value changed
// since it was read (the limits ledger): read it again.
var ErrStale = errors.New("journal: the value changed since it was read")

// Reader reads entries directly (no consumer).
type Reader interface {
	// Lasts returns the guest's newest entry of each kind, in the order
	// of kinds, nil where there is none; in one consistent read where the
	// server allows. For a cluster-wide kind (Kind.ClusterWide) it is the
	// cluster's newest entry of that kind.
	Lasts(ctx context.Context, cluster string, vmid int, kinds ...events.Kind) ([]*Entry, error)
	// Next returns the guest's first entry of kind at or after seq, nil if
	// there is none. The server scans for it: read the newest first.
	Next(ctx context.Context, kind events.Kind, cluster string, vmid int, seq uint64) (*Entry, error)
	// Get returns the entry at seq, nil if there is none.
	Get(ctx context.Context, seq uint64) (*Entry, error)
}

// Appender publishes and waits for the journal's acknowledgement.
type Appender interface {
	Append(ctx context.Context, m events.Message, x Expect) (Ack, error)
}

// Future is a publish not waited for.
type Future interface {
	// Poll returns the outcome without waiting; done is false while it is
	// not known.
	Poll() (ack Ack, err error, done bool)
	// Wait waits for the outcome or for ctx.
	Wait(ctx context.Context) (Ack, error)
}

// AsyncAppender publishes without waiting. Futures fail on their own after
// a bounded time (a publish lost with a dying server is never
// acknowledged).
type AsyncAppender interface {
	AppendAsync(m events.Message, x Expect) (Future, error)
}

// Latest reads the newest entry of every subject matching a filter (the
// observer's memory of what it last published, after a restart).
type Latest interface {
	LastPerSubject(ctx context.Context, filter string, fn func(Entry)) error
}

// Kept reads what the journal keeps of every guest whatever its retention
// drops: each guest's newest desired events, actions and results
// (docs/retention.md).
type Kept interface {
	// Kept returns the kept entries whose journal sequence lies in
	// (after, before), in journal order, under their journal sequence.
	Kept(ctx context.Context, after, before uint64) ([]Entry, error)
}

// KindReader finds a cluster's entries of one kind whatever the guest: the
// observer's look for desired guests its last pass did not list.
type KindReader interface {
	// NextOfKind returns the cluster's first entry of kind at or after
	// seq, nil if there is none.
	NextOfKind(ctx context.Context, kind events.Kind, cluster string, seq uint64) (*Entry, error)
}

// Follower delivers the journal in order.
type Follower interface {
	// Info returns the journal's extent, waiting through transient
	// unavailability (a NATS cluster electing leaders) until ctx ends.
	Info(ctx context.Context) (Info, error)
	// Follow delivers every entry after seq, in order, until ctx ends or
	// the feed is stopped. A feed that stops making progress while the
	// journal is ahead of it recovers by itself; an entry may then come
	// twice (fold idempotently: by sequence).
	Follow(ctx context.Context, after uint64) (Feed, error)
}

// Feed is a Follow in progress.
type Feed interface {
	// C delivers the entries. Reading slowly holds the feed back.
	C() <-chan Entry
	Stop()
}

// The durable consumers converge creates on the journal are named here,
// so that whoever protects them (internal/natsauth's permissions) names
// the same ones as whoever creates them (the executors).

// ExecutorGroup is the default name of a cluster's executor group: its
// lease group and the prefix of its partition consumers.
func ExecutorGroup(cluster string) string { return "executor-" + cluster }

// PartitionConsumer is the durable consumer of partition p of the
// executor group named group.
func PartitionConsumer(group string, p int) string { return fmt.Sprintf("%s-p%02d", group, p) }

// WorkSpec is a durable consumer that hands entries out for work:
// explicit acknowledgements, redelivery without limit after AckWait
// (nothing is dropped), at most MaxAckPending unacknowledged.
type WorkSpec struct {
	Durable, Description string
	// Filter is a stored-subject filter.
	Filter        string
	AckWait       time.Duration
	MaxAckPending int
	// Batch is the most entries buffered client-side; Expiry how long one
	// pull request lives before it is renewed.
	Batch  int
	Expiry time.Duration
	// Recreated, if set, hears that the consumer was found deleted (by an
	// operator, or lost with the stream's state) and was created again:
	// consumption goes on, its unacknowledged entries delivered again.
	Recreated func()
}

// Delivery is one delivery of an entry to a worker.
type Delivery interface {
	Entry() Entry
	// Delivered counts deliveries of the entry, 1 the first time.
	Delivered() uint64
	// InProgress resets the entry's AckWait.
	InProgress() error
	// Term ends the entry's deliveries: nothing can be done with it.
	Term() error
	// Ack acknowledges the entry and waits for the server to confirm it.
	Ack(ctx context.Context) error
}

// Backlog reads what a work consumer has not settled, for metrics
// (converge_consumer_pending); a Consumer may implement it.
type Backlog interface {
	// Backlog returns the entries of durable's filter not delivered yet
	// (pending) and those delivered and not acknowledged (ackPending).
	Backlog(ctx context.Context, durable string) (pending, ackPending uint64, err error)
}

// Consumer hands out work.
type Consumer interface {
	// Consume creates or updates the durable consumer of spec and calls
	// fn with each delivery, on the consumer's goroutine (fn must not
	// block), until stop is called or ctx ends. A consumer deleted under
	// it is created again within seconds (spec.Recreated hears it).
	Consume(ctx context.Context, spec WorkSpec, fn func(Delivery)) (stop func(), err error)
}
