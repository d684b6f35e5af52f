package main

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/executor"
	"github.com/converge-pve/converge/internal/lease"
	"github.com/converge-pve/converge/internal/observer"
	"github.com/converge-pve/converge/internal/planloop"
	"github.com/converge-pve/converge/planner"
)

// validate checks the role settings before anything starts (the
// simulator, NATS, a Proxmox request), naming each bad one by its flag and
// variable. Each package checks its own settings, one at a time so that
// its message can be given the flag's name; a flag is a setting given,
// so its 0 is a value there, never "the default" as in the packages'
// Configs. The CLI holds no rule of its own, but for the settings whose
// packages export no check yet (withoutPackageCheck).
func (f *roleFlags) validate() error {
	l := f.limits
	for _, c := range []struct {
		flag string
		err  error
	}{
		{"observe-interval", observer.CheckInterval(f.observeInterval)},
		{"verify-rate", observer.CheckVerifyRate(f.verifyRate)},
		{"resync-interval", observer.CheckResyncInterval(f.resyncInterval)},
		{"observed-retention", observer.CheckObservedTTL(f.observedTTL, f.observeInterval)},
		{"executor-concurrency", executor.CheckConcurrency(f.concurrency)},
		{"ack-wait", executor.CheckAckWait(f.ackWait)},
		{"node-rate", executor.CheckNodeRate(f.nodeRate)},
		{"lease-ttl", lease.CheckTTL(f.leaseTTL)}, // the executors' and the planners' leases
		{"checkpoint-interval", planner.CheckCheckpointInterval(f.checkpointEvery)},
		{"node-concurrency", planner.CheckNodeConcurrency(l.NodeConcurrency)},
		{"clone-concurrency", planner.CheckCloneConcurrency(l.CloneConcurrency)},
		{"create-rate", planner.CheckCreateRate(l.CreateRate)},
		{"guard-window", planner.CheckGuardWindow(l.GuardWindow)},
		{"guard-share", planner.CheckGuardShare(l.GuardShare)},
		{"guard-min", planner.CheckGuardMin(l.GuardMin)},
		{"max-guests", planner.CheckMaxGuests(l.MaxGuests)},
		{"snapshot-keep", planner.CheckSnapshotKeep(f.snapshotKeep)},
		{"shutdown-timeout", planner.CheckShutdownTimeout(f.shutdownTimeout)},
		{"restart", (&planner.Policy{Restart: events.Restart(f.restart)}).Validate()},
		{"restart-window", (&planner.Policy{RestartWindow: f.restartWindow}).Validate()},
	} {
		if c.err != nil {
			return fmt.Errorf("%s: %w", flagRef(c.flag), c.err)
		}
	}
	if err := f.withoutPackageCheck(); err != nil {
		return err
	}
	// The executor and the planner loop as a whole: anything the checks
	// above missed.
	ec := executor.Config{Concurrency: f.concurrency, AckWait: f.ackWait, LeaseTTL: f.leaseTTL, Policy: f.policy(), NodeRate: f.nodeRate}
	if err := ec.Validate(); err != nil {
		return fmt.Errorf("executor settings: %w", err)
	}
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
	return nil
}

// withoutPackageCheck checks the settings whose packages export no check
// yet (internal/api, internal/pve, internal/bus, projector): each reads 0
// (or below) as its default, or refuses it only once started. Until they
// do (issue 35), the CLI refuses here what would mean nothing.
func (f *roleFlags) withoutPackageCheck() error {
	switch {
	case f.httpMaxConns < 1:
		return fmt.Errorf("%s: must be >= 1, got %d", flagRef("http-max-conns"), f.httpMaxConns)
	case f.pveTimeout <= 0:
		return fmt.Errorf("%s: must be > 0, got %s", flagRef("pve-timeout"), f.pveTimeout)
	case f.retentionAge < 0:
		return fmt.Errorf("%s: must be >= 0 (0: no age limit), got %s", flagRef("retention-age"), f.retentionAge)
	case f.retentionBytes < 0:
		return fmt.Errorf("%s: must be >= 0 (0: no size limit), got %d", flagRef("retention-bytes"), f.retentionBytes)
	}
	// A global flag (sign.go), which the roles' command line holds too.
	if f.flags != nil {
		if w, err := f.flags.GetDuration("signature-window"); err == nil && w <= 0 {
			return fmt.Errorf("%s: must be > 0, got %s", flagRef("signature-window"), w)
		}
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
	// The simulator's (internal/pvesim exports no check yet, see
	// withoutPackageCheck): it reads fewer than one node as one, and
	// refuses the rest only once it is being started.
	switch {
	case f.simNodes < 1:
		return fmt.Errorf("%s: must be >= 1, got %d", flagRef("sim-nodes"), f.simNodes)
	case f.simGuests < 0:
		return fmt.Errorf("%s: must be >= 0, got %d", flagRef("sim-guests"), f.simGuests)
	case f.simResourcesLag < 0:
		return fmt.Errorf("%s: must be >= 0 (0: live), got %s", flagRef("sim-resources-lag"), f.simResourcesLag)
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
