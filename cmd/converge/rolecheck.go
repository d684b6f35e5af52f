package main

import (
	"errors"
	"fmt"
	"math"
	"net"
	"strings"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/executor"
	"github.com/converge-pve/converge/internal/planloop"
	"github.com/converge-pve/converge/planner"
)

// validate checks the role settings before anything starts (the
// simulator, NATS, a Proxmox request), naming each bad one by its flag and
// variable. Where a package has its own check it is asked, one setting at
// a time, so that its message can be given the flag's name.
func (f *roleFlags) validate() error {
	// The libraries read a zero limit as "the default": a 0 given on the
	// command line must not silently become one.
	switch l := f.limits; {
	case l.GuardWindow <= 0:
		return fmt.Errorf("%s must be > 0, got %v", flagRef("guard-window"), l.GuardWindow)
	case l.GuardShare <= 0 || l.GuardShare > 1 || math.IsNaN(l.GuardShare):
		return fmt.Errorf("%s must be within (0, 1], got %v (--guard-min alone sets a fixed threshold)", flagRef("guard-share"), l.GuardShare)
	case l.GuardMin < 1:
		return fmt.Errorf("%s must be >= 1, got %d", flagRef("guard-min"), l.GuardMin)
	case l.NodeConcurrency == 0:
		return fmt.Errorf("%s must be >= 1, or negative for no limit", flagRef("node-concurrency"))
	case l.CloneConcurrency == 0:
		return fmt.Errorf("%s must be >= 1, or negative for no limit", flagRef("clone-concurrency"))
	case l.CreateRate == 0:
		return fmt.Errorf("%s must be >= 1, or negative for no limit", flagRef("create-rate"))
	case l.MaxGuests < 0:
		return fmt.Errorf("%s must be >= 0 (0: no cap), got %d", flagRef("max-guests"), l.MaxGuests)
	}
	// The planner's policy, one setting at a time (planner.Policy.Validate).
	for _, c := range []struct {
		flag string
		p    planner.Policy
	}{
		{"restart", planner.Policy{Restart: events.Restart(f.restart)}},
		{"restart-window", planner.Policy{RestartWindow: f.restartWindow}},
		{"snapshot-keep", planner.Policy{SnapshotKeep: f.snapshotKeep}},
		{"shutdown-timeout", planner.Policy{ShutdownTimeout: f.shutdownTimeout}},
	} {
		if err := c.p.Validate(); err != nil {
			return fmt.Errorf("%s: %w", flagRef(c.flag), err)
		}
	}
	// The observer's bounds (internal/observer's Config.defaults; zero is
	// its default there, a flag given as 0 would silently become it).
	switch {
	case f.observeInterval <= 0:
		return fmt.Errorf("%s must be > 0, got %s", flagRef("observe-interval"), f.observeInterval)
	case f.verifyRate <= 0 || math.IsNaN(f.verifyRate) || math.IsInf(f.verifyRate, 0):
		return fmt.Errorf("%s must be > 0, got %v", flagRef("verify-rate"), f.verifyRate)
	case f.resyncInterval < 0:
		return fmt.Errorf("%s must be > 0, got %s", flagRef("resync-interval"), f.resyncInterval)
	case f.observedTTL < 0 || (f.observedTTL > 0 && (f.observedTTL < time.Second || f.observedTTL < 4*f.observeInterval)):
		return fmt.Errorf("%s must be 0 or at least 1s and 4 × %s (%s), got %s", flagRef("observed-retention"),
			flagRef("observe-interval"), 4*f.observeInterval, f.observedTTL)
	case f.pveTimeout < 0:
		return fmt.Errorf("%s must be >= 0, got %s", flagRef("pve-timeout"), f.pveTimeout)
	}
	// The executor's (executor.New checks its configuration before its
	// dependencies: without them, a configuration error is its only one).
	if _, err := executor.New(executor.Config{Concurrency: f.concurrency, AckWait: f.ackWait, LeaseTTL: f.leaseTTL}, nil, nil, nil); err != nil {
		for field, flag := range map[string]string{"Concurrency": "executor-concurrency", "AckWait": "ack-wait", "LeaseTTL": "lease-ttl"} {
			if msg, ok := strings.CutPrefix(err.Error(), "executor.Config."+field+" "); ok {
				return fmt.Errorf("%s %s", flagRef(flag), msg)
			}
		}
	}
	// The planner loop as a whole (planloop.Config.Validate, which checks
	// the planner's policy and limits): anything the checks above missed.
	pc := planloop.Config{Planner: planner.Config{Policy: f.policy(), Limits: f.limits, CheckpointInterval: f.checkpointEvery},
		LeaseTTL: f.leaseTTL}
	if err := pc.Validate(); err != nil {
		return fmt.Errorf("planner settings: %w", err)
	}
	if err := checkListen("http", f.http); err != nil {
		return err
	}
	if (f.httpTLSCert == "") != (f.httpTLSKey == "") {
		return fmt.Errorf("%s and %s go together", flagRef("http-tls-cert"), flagRef("http-tls-key"))
	}
	if f.httpNoAuth && f.http != "" && !loopbackAddr(f.http) {
		return fmt.Errorf("%s on %s: refused, anyone who reaches it could change guests; bind a loopback address or use --http-tokens", flagRef("http-no-auth"), f.http)
	}
	if f.httpMaxConns < 0 {
		return fmt.Errorf("%s must be >= 0, got %d", flagRef("http-max-conns"), f.httpMaxConns)
	}
	return nil
}

// validate checks up's own settings besides the roles'.
func (f *upFlags) validate() error {
	if err := f.roleFlags.validate(); err != nil {
		return err
	}
	if err := checkListen("nats-listen", f.natsListen); err != nil {
		return err
	}
	if err := checkListen("sim-listen", f.simListen); err != nil {
		return err
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
