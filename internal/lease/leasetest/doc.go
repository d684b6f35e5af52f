// Package leasetest is test support for package lease: [Store], an
// in-memory lease.Store whose keys expire on an injected clock, and
// [Conn], one member's connection to it, which a test can cut to make the
// store unreachable for that member alone. [Conformance] checks a
// lease.Store's semantics, so that the JetStream store and this one are
// held to the same contract. Nothing here is used outside tests.
package leasetest
