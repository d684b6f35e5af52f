package executor

import "github.com/rs/zerolog"

// testConfig is the default Config named name, logging to log.
func testConfig(name string, log zerolog.Logger) Config {
	cfg := DefaultConfig()
	cfg.Name, cfg.Logger = name, log
	return cfg
}

// Unverified is cfg with the journal check of verify.go turned off, for
// the tests of the executor's other mechanisms (crash safety, fences,
// leases, Proxmox outcomes) that drive it with actions no planner would
// plan. It exists only in this package's tests: converge's commands and
// every other package always verify (scenario scripts and internal/app's
// tests drive the verified path).
func Unverified(cfg Config) Config {
	cfg.unverified = true
	return cfg
}
