// Package journaltest is test support: [Journal], an in-memory journal with
// the semantics converge relies on from its JetStream stream (the partition
// subject transform, per-subject fences, msg-id dedupe, direct reads, work
// consumers with acknowledgements and redelivery), for scenario tests that
// run without a server. Nothing here is used outside tests.
package journaltest
