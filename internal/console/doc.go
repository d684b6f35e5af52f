// Package console is the operator console: a few static pages (HTML,
// JavaScript modules, CSS; no framework, no build step) embedded in the
// binary and served by the HTTP API at / and /assets/ (docs/console.md).
//
// The pages hold no data and are public: everything they show comes from
// /v1 with the bearer token the operator pastes, kept in memory and in
// sessionStorage only (never a cookie, never in a URL), so the Guard of
// internal/api decides what the console may read and do, exactly as for
// any other client. A read token sees no write controls; the server
// refuses its writes anyway.
//
// Every answer carries a Content-Security-Policy that admits only this
// server's own scripts, styles and connections (no inline script, no
// framing, no form submissions), nosniff, no referrer, and DENY framing.
// The package links the standard library alone.
package console
