package app

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/api"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/clock"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/natsauth"
	"github.com/converge-pve/converge/internal/observer"
	"github.com/converge-pve/converge/internal/pve"
)

// ReadyConfig says how readiness (/readyz) is probed. Start from
// [DefaultReadyConfig].
type ReadyConfig struct {
	// Interval between journal probes: one publish per NATS connection
	// that the stream refuses by its fence, so nothing is stored, yet only
	// a stream that can take writes answers.
	Interval time.Duration
	// ProxmoxFresh is how old the newest answer to an inventory call may
	// be before the probe makes one itself (DefaultProxmoxFresh). An
	// observer's passes keep it fresh; a process with executors only pays
	// one inventory call per ProxmoxFresh.
	ProxmoxFresh time.Duration
	// Clock times the probes.
	Clock clock.Clock
}

// DefaultReadyInterval is ReadyConfig.Interval's default: a journal that
// stops taking writes shows within seconds, for one fenced publish per
// connection.
const DefaultReadyInterval = 5 * time.Second

// DefaultReadyConfig returns the defaults, ProxmoxFresh for the
// observer's default interval.
func DefaultReadyConfig() ReadyConfig {
	return ReadyConfig{Interval: DefaultReadyInterval, ProxmoxFresh: DefaultProxmoxFresh(observer.DefaultInterval), Clock: clock.Real}
}

// DefaultProxmoxFresh is ProxmoxFresh's default for an observer polling
// every observeInterval: three passes, so that one slow pass costs no
// probe of its own, and at least 30 s, so that a process without an
// observer does not list the inventory often.
func DefaultProxmoxFresh(observeInterval time.Duration) time.Duration {
	return max(30*time.Second, 3*observeInterval)
}

// Validate refuses a ReadyConfig that makes no sense, naming the field.
func (c ReadyConfig) Validate() error {
	switch {
	case c.Interval <= 0:
		return fmt.Errorf("app.ReadyConfig.Interval: must be > 0, got %s", c.Interval)
	case c.ProxmoxFresh <= 0:
		return fmt.Errorf("app.ReadyConfig.ProxmoxFresh: must be > 0, got %s", c.ProxmoxFresh)
	case c.Clock == nil:
		return errors.New("app.ReadyConfig.Clock: must be set (clock.Real)")
	}
	return nil
}

// A probe that does not finish within these says the journal or Proxmox
// does not answer.
const (
	journalProbeTimeout = 3 * time.Second
	proxmoxProbeTimeout = 10 * time.Second
)

// probeConn is one NATS connection of the process, named by its role,
// and where its probe publishes: a subject its role may publish
// (natsauth.ProbeSubject), so that a role under its own NATS user is not
// refused for the probe itself.
type probeConn struct {
	name      string
	subject   string
	connected func() bool
	j         journal.Appender
}

func connOf(name, subject string, b *bus.Bus) probeConn {
	return probeConn{name: name, subject: subject, connected: b.NC.IsConnected, j: b}
}

// readiness computes /readyz: journal probes and Proxmox checks run on
// the probe loop (or CheckReady); a request only reads their results.
type readiness struct {
	cfg     ReadyConfig
	log     zerolog.Logger
	conns   []probeConn
	px      *pxWatch    // nil: no role of this process talks to Proxmox
	planner func() bool // nil: no planner
	observe bool        // an observer's passes keep px fresh
	started time.Time

	probing sync.Mutex // one probe round at a time
	mu      sync.Mutex
	journal []api.Check // nil until the first probe
	ready   bool        // what the last round concluded, for logging changes
}

// probeBody is what a probe would store if its fence passed; it never does.
var probeBody = []byte(`{"readiness_probe":true}`)

// refresh probes the journal on every connection and, when no inventory
// answered recently, Proxmox.
func (r *readiness) refresh(ctx context.Context) {
	r.probing.Lock()
	defer r.probing.Unlock()
	var wg sync.WaitGroup
	if r.px != nil && r.pxStale() {
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, proxmoxProbeTimeout)
			defer cancel()
			_, _ = r.px.Inventory(pctx)
		})
	}
	out := make([]api.Check, len(r.conns))
	for i, c := range r.conns {
		wg.Go(func() { out[i] = r.probeJournal(ctx, c) })
	}
	wg.Wait()
	if ctx.Err() != nil {
		return // stopping: the probes say nothing of the journal
	}
	r.mu.Lock()
	r.journal = out
	r.mu.Unlock()
	r.logChange()
}

// probeJournal publishes with a fence no subject can pass
// (Nats-Expected-Last-Subject-Sequence beyond any sequence): a stream that
// can take writes answers "wrong last sequence" and stores nothing; a
// sealed or deleted stream, a stream without a leader or quorum, JetStream
// disabled or out of resources answer otherwise, or not at all.
func (r *readiness) probeJournal(ctx context.Context, c probeConn) api.Check {
	ck := api.Check{Name: c.name}
	if !c.connected() {
		ck.Reason = "not connected to NATS"
		return ck
	}
	pctx, cancel := context.WithTimeout(ctx, journalProbeTimeout)
	defer cancel()
	_, err := c.j.Append(pctx, events.Message{Subject: c.subject, Data: probeBody}, journal.FencedAt(math.MaxInt64))
	var full error
	if w, ok := c.j.(interface{ WriteRefused() error }); ok {
		full = w.WriteRefused()
	}
	switch {
	case (err == nil || errors.Is(err, journal.ErrFenced)) && full != nil:
		// The fence is checked before the storage: only the role's own
		// writes show a full JetStream.
		ck.Reason = "the journal is full: JetStream refuses to store writes: " + full.Error()
	case err == nil, errors.Is(err, journal.ErrFenced):
		ck.OK = true
	case errors.Is(err, journal.ErrNotPermitted):
		// A deployment whose users do not match the roles: no wait helps.
		ck.Reason = "this process's NATS user may not publish where its role does: " + err.Error()
	case pctx.Err() != nil && ctx.Err() == nil:
		ck.Reason = fmt.Sprintf("the journal does not answer a write within %s (stream missing, no leader or quorum, JetStream disabled?): %v", journalProbeTimeout, err)
	default:
		ck.Reason = "the journal refuses writes: " + err.Error()
	}
	return ck
}

// pxStale reports whether readiness should ask Proxmox itself.
func (r *readiness) pxStale() bool {
	at, _, known := r.px.last()
	if !known {
		if !r.observe {
			return true
		}
		at = r.started // the observer's first pass is under way
	}
	return r.cfg.Clock.Now().Sub(at) >= r.cfg.ProxmoxFresh
}

// checks are /readyz's checks, from what the probes and roles found.
func (r *readiness) checks() []api.Check {
	r.mu.Lock()
	out := append([]api.Check(nil), r.journal...)
	r.mu.Unlock()
	if out == nil {
		out = []api.Check{{Name: "journal", Reason: "not probed yet"}}
	}
	if r.planner != nil {
		c := api.Check{Name: "planner", OK: r.planner()}
		if !c.OK {
			c.Reason = "still folding the journal"
		}
		out = append(out, c)
	}
	if r.px != nil {
		out = append(out, r.proxmoxCheck())
	}
	return out
}

// proxmoxCheck says whether the newest inventory call answered.
func (r *readiness) proxmoxCheck() api.Check {
	c := api.Check{Name: "proxmox"}
	at, err, known := r.px.last()
	age := r.cfg.Clock.Now().Sub(at).Round(time.Second)
	switch {
	case !known:
		c.Reason = "no answer from Proxmox yet"
	case err == nil && age > 2*r.cfg.ProxmoxFresh:
		c.Reason = fmt.Sprintf("no answer from Proxmox for %s", age)
	case err == nil:
		c.OK, c.Reason = true, fmt.Sprintf("inventory answered %s ago", age)
	case pve.Classify(err) == pve.ClassUnauthorized:
		c.Reason = "Proxmox rejects converge's credentials (or its certificate is not trusted): " + err.Error()
	case pve.Classify(err) == pve.ClassTransient:
		c.Reason = "Proxmox unreachable: " + err.Error()
	default:
		c.Reason = "Proxmox inventory failed: " + err.Error()
	}
	return c
}

// logChange logs when the process becomes ready, or stops being ready.
func (r *readiness) logChange() {
	var failing []string
	for _, c := range r.checks() {
		if !c.OK {
			failing = append(failing, c.Name+": "+c.Reason)
		}
	}
	ready := len(failing) == 0
	r.mu.Lock()
	was := r.ready
	r.ready = ready
	r.mu.Unlock()
	switch {
	case ready && !was:
		r.log.Info().Msg("ready")
	case !ready && was:
		r.log.Warn().Str("reason", strings.Join(failing, "; ")).Msg("NOT READY")
	}
}

// run probes every Interval until ctx ends.
func (r *readiness) run(ctx context.Context) error {
	t := r.cfg.Clock.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		r.refresh(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}

// pxWatch records the outcome of inventory calls, the observer's (one per
// pass) and readiness's own, for the Proxmox check.
type pxWatch struct {
	Proxmox
	clock clock.Clock

	mu    sync.Mutex
	at    time.Time
	err   error
	known bool
	// onAnswer, if set, hears each outcome (the executors' reachability
	// gauge).
	onAnswer func(ok bool)
}

// Inventory implements observer.Proxmox, recording the outcome.
func (w *pxWatch) Inventory(ctx context.Context) ([]pve.Resource, error) {
	rs, err := w.Proxmox.Inventory(ctx)
	if err != nil && ctx.Err() != nil {
		return rs, err // cancelled: says nothing of Proxmox
	}
	w.mu.Lock()
	w.at, w.err, w.known = w.clock.Now(), err, true
	on := w.onAnswer
	w.mu.Unlock()
	if on != nil {
		on(err == nil)
	}
	return rs, err
}

// hear sets onAnswer.
func (w *pxWatch) hear(fn func(ok bool)) {
	w.mu.Lock()
	w.onAnswer = fn
	w.mu.Unlock()
}

func (w *pxWatch) last() (time.Time, error, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.at, w.err, w.known
}

// CheckReady runs the readiness probes now (they also run every
// ReadyConfig.Interval); /readyz reports what they found. Without --http
// there is nothing to check.
func (a *App) CheckReady(ctx context.Context) {
	if a.rd != nil {
		a.rd.refresh(ctx)
	}
}

// HTTPAddr is the address the HTTP API listens on, "" without one.
func (a *App) HTTPAddr() string {
	if a.ln == nil {
		return ""
	}
	return a.ln.Addr().String()
}

// newReadiness builds the readiness checks of the roles built.
func (a *App) newReadiness() *readiness {
	r := &readiness{
		cfg: a.cfg.Ready, log: a.log.With().Str("role", "ready").Logger(),
		conns:   append([]probeConn{connOf("journal", natsauth.ProbeSubject(a.cfg.Roles.first(), a.cfg.Cluster), a.b)}, a.conns...),
		observe: a.obs != nil, started: a.cfg.Ready.Clock.Now(),
	}
	if a.pxw != nil {
		r.px = a.pxw
	}
	if a.plan != nil {
		r.planner = a.plan.Ready
	}
	return r
}
