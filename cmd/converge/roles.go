package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/executor"
	"github.com/converge-pve/converge/internal/api"
	"github.com/converge-pve/converge/internal/app"
	"github.com/converge-pve/converge/internal/observer"
	"github.com/converge-pve/converge/internal/planloop"
	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/secret"
	"github.com/converge-pve/converge/planner"
)

// roleFlags configure the reconciler roles. Their defaults are the
// packages' own (each with its reason there).
type roleFlags struct {
	http            string
	httpTokens      string
	httpNoAuth      bool
	httpInsecure    bool
	httpHosts       []string
	httpTLSCert     string
	httpTLSKey      string
	httpMaxConns    int
	apiSignKey      string
	observeInterval time.Duration
	configRefresh   time.Duration
	pve             pve.Config
	pveSecret       secret.Flag
	// flags are the command's, to tell a secret given on the command
	// line from one given by the environment.
	flags           *pflag.FlagSet
	pveTimeout      time.Duration
	concurrency     int
	ackWait         time.Duration
	leaseTTL        time.Duration
	checkpointEvery time.Duration
	retentionAge    time.Duration
	retentionBytes  int64
	observedTTL     time.Duration
	verifyRate      float64
	resyncInterval  time.Duration
	restart         string
	restartWindow   string
	allowDestroy    bool
	createPools     bool
	snapshotKeep    int
	limits          planner.Limits
	nodeRate        float64
	observeOnly     bool
	shutdownTimeout time.Duration
	name            string
	waitForProxmox  bool
	// builtinSim: pve is `up`'s own simulator (--sim), whose plain http
	// on loopback is not warned about.
	builtinSim bool
}

// DefaultObservedRetention is how long the journal keeps observed
// snapshots and heartbeats by default: a day bounds an idle journal
// (docs/retention.md) while each guest's newest snapshot, republished at
// half the term, never leaves it.
const DefaultObservedRetention = 24 * time.Hour

func addRoleFlags(cmd *cobra.Command, f *roleFlags, httpDefault string) {
	fl := cmd.Flags()
	host, _ := os.Hostname()
	fl.StringVar(&f.name, "name", host, "this instance's name in events and logs")
	fl.StringVar(&f.http, "http", httpDefault, "serve /metrics, /healthz, /readyz and /v1 on this host:port (empty: off)")
	fl.StringVar(&f.httpTokens, "http-tokens", "", "YAML file of the HTTP API's bearer tokens, each with a name and a scope, read or write (docs/http.md)")
	fl.BoolVar(&f.httpNoAuth, "http-no-auth", false, "serve /v1 without tokens (refused unless --http is a loopback address)")
	fl.BoolVar(&f.httpInsecure, "http-insecure", false, "allow a non-loopback --http without TLS and tokens (dangerous)")
	fl.StringArrayVar(&f.httpHosts, "http-host", nil, "a DNS name clients use to reach the API (repeatable); requests naming other hosts are refused, IP addresses and localhost are always accepted")
	fl.StringVar(&f.httpTLSCert, "http-tls-cert", "", "serve the HTTP API over TLS with this certificate")
	fl.StringVar(&f.httpTLSKey, "http-tls-key", "", "the key of --http-tls-cert")
	fl.IntVar(&f.httpMaxConns, "http-max-conns", api.DefaultLimits().MaxConns, "most HTTP connections open at once; more wait")
	fl.StringVar(&f.apiSignKey, "api-sign-key", "", "sign desired state posted over HTTP with this ed25519 key (its id: the file's name); the planners must trust its public key (docs/signing.md)")
	fl.DurationVar(&f.observeInterval, "observe-interval", observer.DefaultInterval, "how often the observer polls Proxmox")
	fl.DurationVar(&f.configRefresh, "config-refresh", 0, "shortest time between two verification reads of one guest's config (0: the observe interval; negative: no verification)")
	fl.Float64Var(&f.verifyRate, "verify-rate", observer.DefaultVerifyRate, "verification budget: Proxmox config reads per second per cluster, re-reading guests to find drift the inventory does not show (pending values, description, onboot); every guest is verified within max(config-refresh, guests / verify-rate)")
	fl.DurationVar(&f.resyncInterval, "resync-interval", observer.DefaultResyncInterval, "at most one resync (every guest re-verified, within --verify-rate) this often; requests in between are merged")
	fl.StringVar(&f.pve.URL, "pve-url", "", "Proxmox VE API URL, e.g. https://pve1:8006; plain http:// sends the credentials in clear (warned at start)")
	fl.StringVar(&f.pve.TokenID, "pve-token-id", "", "API token id user@realm!name")
	f.pveSecret = secret.Flag{Name: "pve-token-secret", Env: "CONVERGE_PVE_TOKEN_SECRET", Usage: "API token secret"}
	f.pveSecret.Register(fl)
	f.flags = fl
	fl.StringVar(&f.pve.Fingerprint, "pve-fingerprint", "", "pin the Proxmox certificate's SHA-256 fingerprint")
	fl.StringVar(&f.pve.CAFile, "pve-ca", "", "CA file for the Proxmox certificate")
	fl.BoolVar(&f.pve.Insecure, "pve-insecure", false, "do not verify the Proxmox certificate (dangerous)")
	fl.BoolVar(&f.waitForProxmox, "wait-for-proxmox", false, "start even if Proxmox refuses the credentials or its certificate is not trusted, and keep retrying (/readyz answers 503 meanwhile); without it such a start fails at once")
	fl.DurationVar(&f.pveTimeout, "pve-timeout", pve.DefaultTimeout, "timeout of one Proxmox API request")
	fl.IntVar(&f.concurrency, "executor-concurrency", executor.DefaultConcurrency, "actions an executor runs at once")
	fl.DurationVar(&f.ackWait, "ack-wait", executor.DefaultAckWait, "how long an action may go without a heartbeat before another executor may take it")
	fl.DurationVar(&f.retentionAge, "retention-age", 0, "keep journal events this long (0: no age limit); set the same on every role, each provisions the stream")
	fl.Int64Var(&f.retentionBytes, "retention-bytes", 0, "keep at most this many bytes of journal, oldest dropped first (0: no size limit)")
	fl.DurationVar(&f.observedTTL, "observed-retention", DefaultObservedRetention, "keep observed snapshots and heartbeats this long (0: as long as the journal keeps anything); each guest's newest snapshot is republished at half this term, so it never expires")
	fl.DurationVar(&f.checkpointEvery, "checkpoint-interval", planner.DefaultCheckpointInterval, "how often the planner checkpoints its fold while it advances (and on shutdown); negative: never")
	fl.DurationVar(&f.leaseTTL, "lease-ttl", executor.DefaultLeaseTTL, "how long a silent executor or planner keeps its partitions before others take them over")
	fl.StringVar(&f.restart, "restart", string(planner.DefaultRestart), "may converge restart a running guest to apply changes Proxmox keeps pending (never|allowed); a desired event's restart field overrides it")
	fl.StringVar(&f.restartWindow, "restart-window", "", "allow those restarts only inside this weekly window, local time, e.g. \"Sat 02:00-05:00\" or \"Mon-Fri 22:00-02:00\" (default: any time)")
	fl.IntVar(&f.limits.NodeConcurrency, "node-concurrency", planner.DefaultNodeConcurrency, "most actions (Proxmox tasks) in flight per node, across all planners and executors (negative: no limit)")
	fl.Float64Var(&f.nodeRate, "node-rate", executor.DefaultNodeRate, "most mutating Proxmox API calls per second per node, shared by all executors (negative: no limit)")
	fl.DurationVar(&f.limits.GuardWindow, "guard-window", planner.DefaultGuardWindow, "the mass-change guard's window")
	fl.Float64Var(&f.limits.GuardShare, "guard-share", planner.DefaultGuardShare, "the mass-change guard lets at most this share of the managed guests (or --guard-min, the larger) be shut down, stopped, rebooted, migrated or destroyed within --guard-window; the rest are held until \"converge approve\"")
	fl.IntVar(&f.limits.GuardMin, "guard-min", planner.DefaultGuardMin, "the mass-change guard's threshold is never below this many guests")
	fl.IntVar(&f.limits.CloneConcurrency, "clone-concurrency", planner.DefaultCloneConcurrency, "most full clones at once onto one storage (negative: no limit); linked clones count against the node only")
	fl.IntVar(&f.limits.CreateRate, "create-rate", planner.DefaultCreateRate, "most clones started per minute across the cluster (negative: no limit)")
	fl.IntVar(&f.limits.MaxGuests, "max-guests", 0, "most managed guests that exist or are being created; beyond it creations wait (0: no cap)")
	fl.BoolVar(&f.createPools, "create-pools", false, "create a desired resource pool that does not exist (otherwise moving a guest into it fails, saying so); give it to planners and executors alike")
	fl.IntVar(&f.snapshotKeep, "snapshot-keep", 0, "keep at most this many protective snapshots (snapshot_before) per guest, pruning the oldest (0: keep all); give it to planners and executors alike")
	fl.BoolVar(&f.allowDestroy, "allow-destroy", false, "destroy the guests converge created when their desired state says absent (any other guest only after \"converge approve VMID\"; never a protected one); give it to planners and executors alike")
	fl.BoolVar(&f.observeOnly, "observe-only", false, "plan and report, never act")
	fl.DurationVar(&f.shutdownTimeout, "shutdown-timeout", planner.DefaultShutdownTimeout, "graceful shutdown time before a guest is stopped hard")
}

// policy is the planner policy the flags ask for: the one the live planner
// runs with.
func (f *roleFlags) policy() planner.Policy {
	return planner.Policy{ObserverTimeout: 3 * f.observeInterval, ObserveOnly: f.observeOnly, ShutdownTimeout: f.shutdownTimeout,
		Restart: events.Restart(f.restart), RestartWindow: f.restartWindow, AllowDestroy: f.allowDestroy,
		CreatePools: f.createPools, SnapshotKeep: f.snapshotKeep}
}

// appConfig is the process configuration the flags describe.
func (f *roleFlags) appConfig(g *globals, roles app.Roles, log zerolog.Logger) (app.Config, error) {
	if err := f.validate(); err != nil {
		return app.Config{}, usageError{err}
	}
	bc := g.busConfig("", log)
	bc.MaxAge, bc.MaxBytes = f.retentionAge, f.retentionBytes
	return app.Config{
		Cluster: g.cluster, Name: f.name, Roles: roles, Bus: bc, HTTP: f.http, Logger: log,
		Observer: observer.Config{Interval: f.observeInterval, ConfigRefresh: f.configRefresh, ObservedTTL: f.observedTTL,
			VerifyRate: f.verifyRate, ResyncInterval: f.resyncInterval},
		Planner: planloop.Config{Planner: planner.Config{Policy: f.policy(), Limits: f.limits, CheckpointInterval: f.checkpointEvery},
			LeaseTTL: f.leaseTTL},
		// The executor verifies actions against Plan under the same policy.
		Executor: executor.Config{Concurrency: f.concurrency, AckWait: f.ackWait, LeaseTTL: f.leaseTTL, Policy: f.policy(), NodeRate: f.nodeRate},
	}, nil
}

// httpAuth is the HTTP API's guard as the flags describe it; without
// --http-tokens (and without --http-no-auth), defaultTokens, if set, is a
// tokens file created on first use (`up`'s, under its data directory).
func (f *roleFlags) httpAuth(defaultTokens string, log zerolog.Logger) (app.HTTPAuth, error) {
	h := app.HTTPAuth{Guard: api.Guard{Hosts: f.httpHosts, NoAuth: f.httpNoAuth}, Limits: api.Limits{MaxConns: f.httpMaxConns},
		TLSCert: f.httpTLSCert, TLSKey: f.httpTLSKey, Insecure: f.httpInsecure}
	if f.http == "" || f.httpNoAuth {
		return h, nil
	}
	var err error
	switch {
	case f.httpTokens != "":
		h.Guard.Tokens, err = api.LoadTokens(f.httpTokens)
	case defaultTokens != "":
		var created bool
		h.Guard.Tokens, created, err = api.LoadOrCreateTokens(defaultTokens)
		if err == nil {
			log.Info().Str("file", defaultTokens).Bool("created", created).
				Msg("HTTP API tokens (the admin token may write; curl -H \"Authorization: Bearer $TOKEN\")")
		}
	}
	return h, err
}

// httpSign signs desired state posted over HTTP with --api-sign-key;
// nil without one.
func (f *roleFlags) httpSign() (func(*events.Message) error, error) {
	if f.apiSignKey == "" {
		return nil, nil
	}
	key, id, err := loadSigningKey(f.apiSignKey, "")
	if err != nil {
		return nil, fmt.Errorf("--api-sign-key: %w", err)
	}
	return func(m *events.Message) error { return events.SignMessage(m, key, id, time.Now()) }, nil
}

func (f *roleFlags) pveClient(log zerolog.Logger) (*pve.Client, error) {
	if f.pve.URL == "" {
		return nil, usageError{fmt.Errorf("no Proxmox configured: give %s and an API token (--pve-token-id and --pve-token-secret-file), or use `converge up --sim`", flagRef("pve-url"))}
	}
	if f.pve.Insecure {
		log.Warn().Str("url", f.pve.URL).Msg("TLS VERIFICATION OF PROXMOX IS OFF (--pve-insecure): anyone on the path can impersonate Proxmox and read the API token; use --pve-fingerprint or --pve-ca")
	}
	if f.pve.PlainHTTP() && !(f.builtinSim && f.pve.Loopback()) {
		log.Warn().Str("url", f.pve.URL).Msg("PROXMOX OVER PLAIN HTTP (--pve-url http://…): the API token or password, and every ticket, cross the network in clear, readable and replayable by anyone on the path; use https:// with --pve-fingerprint or --pve-ca")
	}
	if f.flags != nil && !f.builtinSim {
		s, err := f.pveSecret.Resolve(f.flags, log)
		if err != nil {
			return nil, err
		}
		f.pve.TokenSecret = s
	}
	if err := checkPVE(f.pve); err != nil {
		return nil, usageError{err}
	}
	cfg := f.pve
	cfg.Timeout = f.pveTimeout
	cfg.Logger = log
	px, err := pve.New(cfg)
	if err != nil {
		return nil, usageError{pveFlagError(err)}
	}
	return px, nil
}

// newRoleCmd runs one role against an existing NATS (--nats).
func newRoleCmd(g *globals, role string) *cobra.Command {
	f := &roleFlags{}
	short := "Run the " + role + " role against an existing NATS JetStream (--nats)"
	if role == "api" {
		short = "Serve the HTTP API (/v1: desired state, operators' requests, views) against an existing NATS JetStream (--nats), as NATS user api"
	}
	cmd := &cobra.Command{
		Use:   role,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			if g.natsURL == "" {
				return usageError{errors.New("the " + role + " role needs " + flagRef("nats") + "; `converge up` runs every role with an embedded server")}
			}
			roles := app.Roles{Observer: role == "observer", Planner: role == "planner", Executor: role == "executor", API: role == "api"}
			if roles.API && f.http == "" {
				return usageError{errors.New("the api role serves the HTTP API: give it " + flagRef("http") + " (e.g. 0.0.0.0:8080 with --http-tokens and TLS)")}
			}
			cfg, err := f.appConfig(g, roles, log)
			if err != nil {
				return err
			}
			if cfg.HTTPAuth, err = f.httpAuth("", log); err != nil {
				return err
			}
			if cfg.Planner.Planner.Auth, err = g.sign.auth(nil); err != nil {
				return err
			}
			cfg.Executor.Auth = cfg.Planner.Planner.Auth
			logAuth(log, cfg.Executor.Auth)
			if cfg.HTTPSign, err = f.httpSign(); err != nil {
				return err
			}
			if roles.Observer || roles.Executor {
				px, err := f.pveClient(log)
				if err != nil {
					return err
				}
				if err := f.checkProxmox(cmd.Context(), px, log); err != nil {
					return err
				}
				cfg.Proxmox = px
			}
			log.Info().Str("role", role).Str("cluster", g.cluster).Msg("starting")
			return g.natsAuthHint(app.Run(cmd.Context(), cfg))
		},
	}
	addRoleFlags(cmd, f, "")
	g.check(cmd, f.validate)
	return cmd
}
