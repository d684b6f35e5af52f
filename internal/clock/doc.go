// Package clock is the one seam between converge's roles and time: the
// planner loop, the executor, the observer and the lease manager read the
// time and wait through a [Clock], never through package time directly, so
// that their behaviour can be driven by a script (package clocktest's
// fake clock) instead of waited for. [Real] is the wall clock.
//
// Pure code (planner.Plan, planner.Engine, the projector) takes the time
// as an argument instead.
package clock
