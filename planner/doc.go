// Package planner holds the pure Plan(view, policy, now) function (no I/O,
// no clock, no logging) and the service around it that consumes events,
// folds them with package projector, plans and publishes fenced actions.
//
// Implemented by the event-pipeline work (issue 3).
package planner
