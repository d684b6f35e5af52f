// Package api is converge's HTTP interface (DESIGN.md §3), served by `up`
// and every role with --http: /metrics (Prometheus), /healthz (the process
// is alive), /readyz (connected to NATS and, where it runs, the planner has
// caught up with the journal), GET /v1/guests, GET /v1/guests/{vmid}, and
// POST /v1/desired/{vmid} for services that do not speak NATS.
//
// POST /v1/desired validates exactly as the desired event does; an invalid
// body gets 400 with every problem listed and nothing is published. A valid
// one is journalled and answered 202 with its stream sequence (the desired
// revision). The publisher is taken from the X-Converge-Publisher header
// (default "http"), the correlation id from X-Correlation-Id.
package api
