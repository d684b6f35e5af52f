// Package bus is converge's NATS JetStream plumbing: the connection (URL
// list or an in-process embedded server, user/password, token, creds
// file, nkey, TLS), idempotent provisioning of the journal stream and the
// views bucket, and the implementations of the narrow interfaces the roles
// use instead of a connection: the journal's roles of package journal
// (Reader, Appender, AsyncAppender, Follower, Consumer, Latest, Kept), the view
// store of package views ([ViewStore]), the lease store of package lease
// ([Bus.LeaseStore]), the planner's checkpoint store ([Checkpoints]) and
// live subscriptions for the control router ([Bus.Subscribe]). It does not
// link nats-server: the embedded server is package natsserver's.
//
// # The journal
//
// One stream (default "PVE") holds every converge event under pve.>, with
// Limits retention so that it is a durable journal, not a work queue:
// nothing is removed when it is consumed. A subject transform stores
// pve.<kind>.<cluster>.<vmid> as pve.<kind>.<cluster>.<vmid>.<partition>,
// where partition = hash(cluster, vmid) mod Partitions (docs/architecture.md), so
// every event of one guest lands in the same partition and consumers can
// own partitions. Partitions is fixed when the stream is created: changing
// it would move guests between partitions.
//
// Publishing always goes to the plain subject; consumers and direct reads
// use stored subjects ([events.StoredSubject], [events.StoredFilter]).
// Fenced publishes that the stream refuses (10071, or 10164 on a
// replicated stream) are journal.ErrFenced.
//
// A second stream, the keep stream ("<stream>_KEEP", [Bus.KeepStreamConfig]),
// is provisioned with a journal that has retention limits (none without:
// nothing is dropped, and the copy would double every event's write), and
// new limits wait until it has copied the journal ([KeepBehindError]).
// JetStream fills it by sourcing the
// journal's desired, action and result subjects, KeepPerSubject per
// stored subject, without age or size limit, so that every guest's newest
// ones survive the journal's retention; [Bus.Kept] reads them back under
// their journal sequence (docs/retention.md).
//
// # Views
//
// The KV bucket (default "converge_views") holds the per-guest documents
// the planner writes, so that status queries never replay the journal.
//
// # Testing
//
// Package bustest gives each test an embedded server (package natsserver)
// in a temp dir and a provisioned Bus on it.
package bus
