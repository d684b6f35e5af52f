// Package projector folds events into per-guest views (desired, observed,
// in-flight action, last result, status). The fold is deterministic: the same
// events in the same order give the same views, so replaying the stream
// rebuilds everything.
//
// The fold is implemented by the event-pipeline work (issue 3).
package projector
