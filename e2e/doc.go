// Package e2e holds converge's process-level tests: what only real
// processes show. `converge up` and the role commands run as separate
// processes (the binary built once by TestMain, with the race detector
// when the tests have it), driven through their CLI, HTTP API, NATS and
// the simulator's API, stopped with SIGTERM and killed with SIGKILL; a
// three-node NATS cluster loses nodes under them. Everything engine-level
// is tested faster beside the engines (planner and executor scenarios);
// these tests keep only what needs processes. It has no runtime code.
package e2e
