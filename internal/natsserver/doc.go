// Package natsserver runs the embedded nats-server with JetStream under a
// data directory: what `converge up` runs when no --nats is given, a node
// of a NATS cluster for `converge nats-node`, and every test's server. It
// is the only package that links nats-server; roles that connect to an
// external NATS (package bus) do not need it.
//
// # Usage
//
//	s, err := natsserver.Start(natsserver.Options{DataDir: dir})
//	...
//	cfg := bus.DefaultConfig()
//	cfg.InProcess = s
//	b, err := bus.Connect(ctx, cfg)
//
// A process's own roles reach the server at [LocalURL] (loopback TCP, at
// the bound address) rather than in-process, unless an operator's
// configuration file or a cluster is in play.
//
// [Start] waits until the server accepts connections. A cluster node
// accepts connections before the cluster has elected its JetStream meta
// leader; JetStream requests fail until then (seconds: Raft election
// timeouts), which bus's provisioning waits out.
package natsserver
