// Package api is converge's HTTP interface (docs/http.md), served by `up`
// and every role with --http: /metrics (Prometheus), /healthz (liveness:
// the process answers), /readyz, GET /v1/guests, GET /v1/guests/{vmid}, and
// POST /v1/desired/{vmid} for services that do not speak NATS.
//
// Operators' requests (operate.go): POST /v1/approve, /v1/pause,
// /v1/resume and /v1/release take {"vmids": […]} or {"all": true} and an
// optional "reason", refuse unknown fields and whatever
// events.Control.Validate refuses (400, nothing published), and answer 202
// with what was journalled under the token's name.
//
// The operator console's reads: GET /v1/whoami (the token's journalled
// name and scope: the console's sign-in), GET /v1/guests/{vmid}/timeline
// (a guest's history from the journal, newest first, paged; read through
// Server.Timeline, which internal/app wires to internal/audit, since this
// package links no NATS client), and GET /v1/stream (stream.go): NDJSON,
// a hello line, every guest's summary, "synced", then each change the
// views watch sees, and a ping every 15 s. A stream is exempt from the
// server's WriteTimeout (each line has its own 30 s deadline, so a reader
// that stops reading is dropped), at most Server.MaxStreams (64) are open
// at once (503 beyond), and [Server.EndStreams], registered with
// http.Server.RegisterOnShutdown, ends them so that Shutdown does not
// wait on them.
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
// revision). The correlation id is taken from X-Correlation-Id.
//
// Every /v1 call passes [Guard] first (docs/http.md): a bearer token of
// the right scope (read for GET, write for POST; 401 without one, 403 with
// a read token on a write), only application/json bodies (415: an HTML
// form cannot post), no foreign Origin (403), and a Host that is an IP
// address, localhost or a configured name (421: a DNS-rebinding page
// names its own). The publisher journalled is the authenticated one,
// "token:<name>", never a header the caller chose. /healthz, /readyz and
// /metrics stay open. [Limits] bounds what a slow or numerous client can
// hold (timeouts, header size, open connections).
//
// / and /assets/ serve the operator console (internal/console,
// docs/console.md): public pages without data, which call /v1 like any
// other client.
package api
