// Package bustest is test support: an embedded nats-server with JetStream in
// a temp dir per test, and a provisioned [bus.Bus] connected to it
// in-process. Nothing here is used outside tests.
package bustest
