// Package natscluster is test support: a NATS JetStream cluster of n
// nodes on loopback, each a separate process, so that a test can SIGKILL a
// node the way a crash would (an in-process server can only shut down
// gracefully, which hands Raft leadership over first).
//
// [Start] runs `EXE ARGS... nats-node --name … --store … --listen …
// --cluster-name … --cluster-listen … --routes …` per node, with the
// environment variable CONVERGE_RUN_MAIN=1 so that a re-executed converge
// test binary acts as the converge binary (the real binary ignores it).
// Every node gets its own temp store and pre-picked free loopback ports
// that it keeps across [Cluster.Restart]. The test's cleanup kills the
// nodes it started, by PID, and nothing else; node logs are written to the
// test log when the test fails.
//
// A fresh cluster needs seconds to elect its JetStream meta leader (Raft
// election timeouts of 4–9 s): call [Cluster.WaitReady] before using it.
package natscluster
