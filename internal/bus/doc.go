// Package bus is converge's NATS JetStream plumbing: the connection
// (URL list, user/password, token, creds file, nkey, TLS), the embedded
// nats-server with JetStream under a data directory, and idempotent
// provisioning of the journal stream and the projection bucket.
//
// # The journal
//
// One stream (default "PVE") holds every converge event under pve.>, with
// Limits retention so that it is a durable journal, not a work queue:
// nothing is removed when it is consumed. A subject transform stores
// pve.<kind>.<cluster>.<vmid> as pve.<kind>.<cluster>.<vmid>.<partition>,
// where partition = hash(cluster, vmid) mod Partitions (DESIGN.md §5), so
// every event of one guest lands in the same partition and consumers can
// own partitions. Partitions is fixed when the stream is created: changing
// it would move guests between partitions.
//
// Publishing always goes to the plain subject; consumers and direct reads
// use stored subjects ([events.StoredFilter]).
//
// # Projections
//
// The KV bucket (default "converge_views") holds materialised per-guest
// views so that status queries never replay the journal.
//
// # Testing
//
// [StartEmbedded] with a temp dir and port -1 gives each test its own
// server; it is the same server `converge up` runs.
package bus
