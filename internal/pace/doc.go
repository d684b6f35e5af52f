// Package pace spreads long background work over time, so that it never
// holds a processor for long while latency-bound work waits for one.
//
// The observer's inventory read at 10,000 guests is tens of milliseconds
// of CPU in one goroutine (and as much again in an in-process simulator
// answering it). On a two-core host busy with executors and the planner,
// that goroutine kept one processor to itself: runtime.Gosched does not
// help, because a goroutine that yields is picked up again before the
// scheduler polls the network for the goroutines waiting on NATS and HTTP
// answers. A Pacer instead puts the goroutine to sleep after each slice of
// work, so the processor goes back to the scheduler, which then finds the
// waiting goroutines.
//
// Contract: a loop calls Step between small units of work (each well under
// the work slice). Once the work since the last rest reaches Work, Step
// sleeps for Rest, or until the context ends. The work therefore takes at
// most Work/(Work+Rest) of one processor, plus one unit, and its wall time
// grows accordingly; Step never fails and does nothing else.
package pace
