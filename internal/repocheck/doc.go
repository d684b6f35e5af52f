// Package repocheck holds the repository-wide tests that keep the tree as
// docs/architecture.md describes it: every Go package states its contract
// in a doc.go (TestPackageDocs), and packages import only what their
// layer allows (TestLayers): the public contract (events), the fold
// (projector) and the planner's decisions (planner) link neither
// nats-server, nor the NATS client, nor go-proxmox; the roles reach NATS
// only through the journal's role interfaces. It has no runtime code.
package repocheck
