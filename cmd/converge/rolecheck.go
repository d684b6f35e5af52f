package main

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/converge-pve/converge/internal/pve"
)

// validate checks the role settings before anything starts (the
// simulator, NATS, a Proxmox request), naming each bad one by its flag and
// variable. The packages check their configs (app.Config.ValidateSettings,
// pve.Config.Validate); fieldFlags names a field's flag. A flag is a
// setting given, so its 0 is a value, never "the default".
func (f *roleFlags) validate() error {
	// The global flags (cluster, stream, replicas …) have their own check.
	if err := f.derived().ValidateSettings(); err != nil {
		return flagError(err)
	}
	// The Proxmox settings as the client will judge them, with
	// placeholders for what may come later (a URL and token from up's
	// simulator, the secret from its file).
	pc := f.pve
	pc.ConfigTaskWait = pve.ConfigTaskWaitWithin(pc.Timeout)
	if pc.URL == "" {
		pc.URL = "https://proxmox.invalid"
	}
	if pc.TokenID == "" && pc.Username == "" {
		pc.TokenID = "converge@pve!converge"
	}
	if pc.TokenID != "" {
		pc.TokenSecret = "secret"
	}
	if !f.nodeCallsUnlimited && pc.NodeCalls < 1 {
		// 0 is no limit to the client; on the flag it would mean no call.
		return flagError(fmt.Errorf("pve.Config.NodeCalls: must be >= 1 (or unlimited), got %d", pc.NodeCalls))
	}
	if err := checkPVE(pc); err != nil {
		return err
	}
	if err := pc.Validate(); err != nil {
		return flagError(err)
	}
	if err := checkListen("http", f.cfg.HTTP); err != nil {
		return err
	}
	h := f.cfg.HTTPAuth
	if (h.TLSCert == "") != (h.TLSKey == "") {
		return fmt.Errorf("%s and %s go together", flagRef("http-tls-cert"), flagRef("http-tls-key"))
	}
	if h.Guard.NoAuth && f.cfg.HTTP != "" && !loopbackAddr(f.cfg.HTTP) {
		return fmt.Errorf("%s on %s: refused, anyone who reaches it could change guests; bind a loopback address or use --http-tokens", flagRef("http-no-auth"), f.cfg.HTTP)
	}
	// A global flag (sign.go), which the roles' command line holds too.
	if f.flags != nil {
		if w, err := f.flags.GetDuration("signature-window"); err == nil && w <= 0 {
			return fmt.Errorf("%s: must be > 0, got %s", flagRef("signature-window"), w)
		}
	}
	return nil
}

// fieldFlags name the flag that sets each config field, for the
// packages' validation errors ("observer.Config.Interval: must be …").
var fieldFlags = map[string]string{
	"app.Config.Name":                          "name",
	"bus.Config.MaxAge":                        "retention-age",
	"bus.Config.MaxBytes":                      "retention-bytes",
	"bus.Config.Replicas":                      "replicas",
	"bus.Config.Stream":                        "stream",
	"bus.Config.Bucket":                        "bucket",
	"api.Limits.MaxConns":                      "http-max-conns",
	"observer.Config.Interval":                 "observe-interval",
	"observer.Config.ConfigRefresh":            "config-refresh",
	"observer.Config.VerifyRate":               "verify-rate",
	"observer.Config.ResyncInterval":           "resync-interval",
	"observer.Config.ObservedTTL":              "observed-retention",
	"executor.Config.Concurrency":              "executor-concurrency",
	"executor.Config.AckWait":                  "ack-wait",
	"executor.Config.LeaseTTL":                 "lease-ttl",
	"executor.Config.NodeRate":                 "node-rate",
	"planloop.Config.LeaseTTL":                 "lease-ttl",
	"planner.Config.CheckpointInterval":        "checkpoint-interval",
	"planner.Limits.NodeConcurrency":           "node-concurrency",
	"planner.Limits.CloneConcurrency":          "clone-concurrency",
	"planner.Limits.CreateRate":                "create-rate",
	"planner.Limits.GuardWindow":               "guard-window",
	"planner.Limits.GuardShare":                "guard-share",
	"planner.Limits.GuardMin":                  "guard-min",
	"planner.Limits.MaxGuests":                 "max-guests",
	"planner.Policy.Restart":                   "restart",
	"planner.Policy.RestartWindow":             "restart-window",
	"planner.Policy.ShutdownTimeout":           "shutdown-timeout",
	"planner.Policy.SnapshotKeep":              "snapshot-keep",
	"pve.Config.URL":                           "pve-url",
	"pve.Config.TokenID":                       "pve-token-id",
	"pve.Config.TokenSecret":                   "pve-token-secret",
	"pve.Config.Username":                      "pve-token-id",
	"pve.Config.Fingerprint":                   "pve-fingerprint",
	"pve.Config.CAFile":                        "pve-ca",
	"pve.Config.Insecure":                      "pve-insecure",
	"pve.Config.Timeout":                       "pve-timeout",
	"pve.Config.NodeCalls":                     "node-calls",
	"bench.Options.Guests":                     "guests",
	"bench.Options.Changes":                    "changes",
	"bench.Options.BurstChanges":               "burst-changes",
	"bench.Options.Rate":                       "rate",
	"bench.Options.LatencyN":                   "latency-changes",
	"bench.Options.LatencyAt":                  "latency-at",
	"bench.Options.Partitions":                 "partitions",
	"bench.Options.Executors":                  "executors",
	"bench.Options.Concurrency":                "executor-concurrency",
	"bench.Options.ShippedLimits":              "shipped-limits",
	"bench.Options.TaskLatency":                "task-latency",
	"bench.Options.ResourcesLag":               "sim-resources-lag",
	"bench.ProxmoxOptions.Guests":              "guests",
	"bench.ProxmoxOptions.Nodes":               "nodes",
	"bench.ProxmoxOptions.NodeConcurrency":     "node-concurrency",
	"bench.ProxmoxOptions.NodeRate":            "node-rate",
	"bench.ProxmoxOptions.APILatency":          "api-latency",
	"bench.ProxmoxOptions.PowerTask":           "power-task",
	"bench.ProxmoxOptions.ConfigTask":          "config-task",
	"bench.ProxmoxOptions.BaselineParallelism": "baseline-parallelism",
	"bench.ProxmoxOptions.BaselinePoll":        "baseline-poll",
	"bench.ProxmoxOptions.ResourcesLag":        "sim-resources-lag",
	"bench.EstateOptions.Guests":               "guests",
	"bench.EstateOptions.Nodes":                "nodes",
	"bench.EstateOptions.NodeConcurrency":      "node-concurrency",
	"bench.EstateOptions.NodeRate":             "node-rate",
	"bench.EstateOptions.APILatency":           "api-latency",
	"bench.EstateOptions.PowerTask":            "power-task",
	"bench.EstateOptions.ConfigTask":           "config-task",
	"bench.EstateOptions.VerifyWait":           "verify-wait",
	"bench.EstateOptions.ResourcesLag":         "sim-resources-lag",
}

// flagError names the flag (and its variable) of the config field a
// validation error starts with; an error of a field no flag sets is
// returned as it is.
func flagError(err error) error {
	field, rest, ok := strings.Cut(err.Error(), ": ")
	flag, known := fieldFlags[field]
	switch {
	case !ok || !known:
		return err
	case strings.HasPrefix(field, "bench."): // no variable sets bench's flags
		return fmt.Errorf("--%s: %s", flag, rest)
	}
	return fmt.Errorf("%s: %s", flagRef(flag), rest)
}

// validate checks up's own settings besides the roles'.
func (f *upFlags) validate() error {
	if err := f.roleFlags.validate(); err != nil {
		return err
	}
	if f.simResourcesLag < 0 {
		return fmt.Errorf("%s: must be >= 0 (0: live), got %s", flagRef("sim-resources-lag"), f.simResourcesLag)
	}
	if err := checkListen("nats-listen", f.natsListen); err != nil {
		return err
	}
	if err := checkListen("sim-listen", f.simListen); err != nil {
		return err
	}
	// The simulator's (internal/pvesim exports no check yet): it reads
	// fewer than one node as one, and refuses the rest only once it is
	// being started.
	switch {
	case f.simNodes < 1:
		return fmt.Errorf("%s: must be >= 1, got %d", flagRef("sim-nodes"), f.simNodes)
	case f.simGuests < 0:
		return fmt.Errorf("%s: must be >= 0, got %d", flagRef("sim-guests"), f.simGuests)
	}
	if f.simToken != "" {
		if id, secret, ok := strings.Cut(f.simToken, "="); !ok || id == "" || secret == "" {
			return fmt.Errorf("%s: want ID=SECRET", flagRef("sim-token"))
		}
	}
	return nil
}

// checkListen refuses a listen address that is not host:port ("" is off).
func checkListen(flag, addr string) error {
	if addr == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		_, err = net.LookupPort("tcp", port)
	}
	if err != nil {
		var ae *net.AddrError
		if errors.As(err, &ae) {
			err = errors.New(ae.Err)
		}
		return fmt.Errorf("%s %q: want HOST:PORT, e.g. 127.0.0.1:8080 (%v)", flagRef(flag), addr, err)
	}
	return nil
}

// loopbackAddr reports whether host:port is on loopback.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}
