// Package api is converge's HTTP interface (DESIGN.md §3), served by `up`
// and every role with --http: /metrics (Prometheus), /healthz (liveness:
// the process answers), /readyz, GET /v1/guests, GET /v1/guests/{vmid}, and
// POST /v1/desired/{vmid} for services that do not speak NATS.
//
// /readyz answers 200 when every check of Server.Checks passes and 503
// otherwise; the body ([Readiness]) lists every check, and its reason sums
// up the failing ones ("journal: the journal refuses writes: …"). The
// checks are the process's to define (internal/app: the journal writable
// on each connection, the planner caught up, Proxmox answering the
// inventory); a request only reads them, it never calls out.
//
// POST /v1/desired validates exactly as the desired event does; an invalid
// body gets 400 with every problem listed and nothing is published. A valid
// one is journalled and answered 202 with its stream sequence (the desired
// revision). The publisher is taken from the X-Converge-Publisher header
// (default "http"), the correlation id from X-Correlation-Id.
package api
