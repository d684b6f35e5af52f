// Package events defines converge's public event contract: the desired,
// observed, action and result events, their JSON encoding, validation and
// NATS subjects (DESIGN.md §3). Other Go services import it to publish
// desired state.
//
// The package is filled in by the event-pipeline work (issue 3); until then
// it only reserves the import path so that the layout of DESIGN.md §2 holds.
package events
