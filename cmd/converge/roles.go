package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/app"
	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/secret"
)

// roleFlags configure the reconciler roles. Most flags set a field of cfg
// or pve directly, both built from the packages' DefaultConfig, so a
// flag's default is the package's own (each with its reason there);
// roleFlags holds only what is no package's setting.
type roleFlags struct {
	cfg app.Config
	pve pve.Config
	// httpTokens and apiSignKey are files, read by Setup and httpSign.
	httpTokens, apiSignKey string
	pveSecret              secret.Flag
	// flags are the command's, to tell a secret given on the command
	// line from one given by the environment.
	flags          *pflag.FlagSet
	waitForProxmox bool
	// configRefresh knows whether --config-refresh was given: by default
	// it follows --observe-interval.
	configRefresh *offDuration
	// nodeCallsUnlimited: --node-calls unlimited (pve.Config.NodeCalls 0).
	nodeCallsUnlimited bool
	// deprecated are warnings about settings given in a deprecated form,
	// logged at start.
	deprecated []string
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
	f.cfg, f.pve = app.DefaultConfig(), pve.DefaultConfig()
	c := &f.cfg
	c.HTTP, c.Observer.ObservedTTL = httpDefault, DefaultObservedRetention
	o, pl, ex := &c.Observer, &c.Planner.Planner, &c.Executor
	pol, lim := &pl.Policy, &pl.Limits
	note := func(s string) { f.deprecated = append(f.deprecated, s) }
	fl := cmd.Flags()
	fl.StringVar(&c.Name, "name", c.Name, "this instance's name in events and logs")
	fl.StringVar(&c.HTTP, "http", c.HTTP, "serve /metrics, /healthz, /readyz and /v1 on this host:port (empty: off)")
	fl.StringVar(&f.httpTokens, "http-tokens", "", "YAML file of the HTTP API's bearer tokens, each with a name and a scope, read or write (docs/http.md)")
	fl.BoolVar(&c.HTTPAuth.Guard.NoAuth, "http-no-auth", false, "serve /v1 without tokens (refused unless --http is a loopback address)")
	fl.BoolVar(&c.HTTPAuth.Insecure, "http-insecure", false, "allow a non-loopback --http without TLS and tokens (dangerous)")
	fl.StringArrayVar(&c.HTTPAuth.Guard.Hosts, "http-host", nil, "a DNS name clients use to reach the API (repeatable); requests naming other hosts are refused, IP addresses and localhost are always accepted")
	fl.StringVar(&c.HTTPAuth.TLSCert, "http-tls-cert", "", "serve the HTTP API over TLS with this certificate")
	fl.StringVar(&c.HTTPAuth.TLSKey, "http-tls-key", "", "the key of --http-tls-cert")
	fl.IntVar(&c.HTTPAuth.Limits.MaxConns, "http-max-conns", c.HTTPAuth.Limits.MaxConns, "most HTTP connections open at once; more wait")
	fl.StringVar(&f.apiSignKey, "api-sign-key", "", "sign desired state posted over HTTP with this ed25519 key (its id: the file's name); the planners must trust its public key (docs/signing.md)")
	fl.DurationVar(&o.Interval, "observe-interval", o.Interval, "how often the observer polls Proxmox")
	f.configRefresh = &offDuration{d: &o.ConfigRefresh, off: &o.VerifyOff, name: "config-refresh", note: note, follows: "the observe interval"}
	fl.Var(f.configRefresh, "config-refresh", "shortest time between two verification reads of one guest's config (default: the observe interval; 0: the same, deprecated); off: no verification (a negative value, deprecated, is off too)")
	fl.Float64Var(&o.VerifyRate, "verify-rate", o.VerifyRate, "verification budget: Proxmox config reads (GET …/pending) per second per node, at most that many in any second on any node (each node's pveproxy serves its own guests' reads), re-reading guests to find drift the inventory does not show (pending values, description, onboot); every guest is verified within max(config-refresh, guests of the fullest node / verify-rate)")
	fl.DurationVar(&o.ResyncInterval, "resync-interval", o.ResyncInterval, "at most one resync (every guest re-verified, within --verify-rate) this often; requests in between are merged")
	fl.StringVar(&f.pve.URL, "pve-url", "", "Proxmox VE API URL, e.g. https://pve1:8006; plain http:// sends the credentials in clear (warned at start)")
	fl.StringVar(&f.pve.TokenID, "pve-token-id", "", "API token id user@realm!name")
	f.pveSecret = secret.Flag{Name: "pve-token-secret", Env: "CONVERGE_PVE_TOKEN_SECRET", Usage: "API token secret"}
	f.pveSecret.Register(fl)
	f.flags = fl
	fl.StringVar(&f.pve.Fingerprint, "pve-fingerprint", "", "pin the Proxmox certificate's SHA-256 fingerprint")
	fl.StringVar(&f.pve.CAFile, "pve-ca", "", "CA file for the Proxmox certificate")
	fl.BoolVar(&f.pve.Insecure, "pve-insecure", false, "do not verify the Proxmox certificate (dangerous)")
	fl.BoolVar(&f.waitForProxmox, "wait-for-proxmox", false, "start even if Proxmox refuses the credentials or its certificate is not trusted, and keep retrying (/readyz answers 503 meanwhile); without it such a start fails at once")
	fl.DurationVar(&f.pve.Timeout, "pve-timeout", f.pve.Timeout, "timeout of one Proxmox API request")
	fl.Var(&limitInt{n: &f.pve.NodeCalls, unlimited: &f.nodeCallsUnlimited, name: "node-calls", note: note}, "node-calls",
		"most Proxmox API calls a process has in flight to one node, of each of its two kinds of worker (3: what a node's pvedaemon and pveproxy each serve at once; each executor process has its own); more wait their turn, task starts and status reads first, and (with more than one slot) while a task of the process runs on the node its writes keep one of its slots free for them; a write a task waits on (a config write before its guest's reboot) that ends while none runs holds its slot from the next writes until a task starts on the node, for at most 250 ms"+unlimitedNote)
	fl.IntVar(&ex.Concurrency, "executor-concurrency", ex.Concurrency, "actions an executor runs at once")
	fl.DurationVar(&ex.AckWait, "ack-wait", ex.AckWait, "how long an action may go without a heartbeat before another executor may take it")
	fl.DurationVar(&c.Bus.MaxAge, "retention-age", 0, "keep journal events this long (0: no age limit); set the same on every role, each provisions the stream")
	fl.Int64Var(&c.Bus.MaxBytes, "retention-bytes", 0, "keep at most this many bytes of journal, oldest dropped first (0: no size limit)")
	fl.DurationVar(&o.ObservedTTL, "observed-retention", o.ObservedTTL, "keep observed snapshots and heartbeats this long (0: as long as the journal keeps anything); each guest's newest snapshot is republished at half this term, so it never expires")
	fl.Var(&offDuration{d: &pl.CheckpointInterval, off: &pl.CheckpointOff, name: "checkpoint-interval", note: note}, "checkpoint-interval",
		"how often the planner checkpoints its fold while it advances (and on shutdown); off: never (a negative value, deprecated, is off too)")
	// One TTL for the executors' leases and the planners': appConfig
	// gives the planner the executor's.
	fl.DurationVar(&ex.LeaseTTL, "lease-ttl", ex.LeaseTTL, "how long a silent executor or planner keeps its partitions before others take them over")
	fl.StringVar((*string)(&pol.Restart), "restart", string(pol.Restart), "may converge restart a running guest to apply changes Proxmox keeps pending (never|allowed); a desired event's restart field overrides it")
	fl.StringVar(&pol.RestartWindow, "restart-window", "", "allow those restarts only inside this weekly window, local time, e.g. \"Sat 02:00-05:00\" or \"Mon-Fri 22:00-02:00\" (default: any time)")
	unlimited := unlimitedNote
	fl.Var(&limitInt{n: &lim.NodeConcurrency, unlimited: &lim.NodeConcurrencyUnlimited, name: "node-concurrency", note: note}, "node-concurrency",
		"most node tasks (starts, shutdowns, stops, reboots, destroys, snapshots, resizes; a migration on both nodes) in flight per node, across all planners and executors; config writes and clones take none (clones wait for --clone-concurrency and their template)"+unlimited)
	fl.Var(&limitFloat{r: &ex.NodeRate, unlimited: &ex.NodeRateUnlimited, name: "node-rate", note: note}, "node-rate",
		"most mutating Proxmox API calls per second per node, shared by all executors (Proxmox has no rate limiter; --node-calls bounds what converge puts in a node's queue)"+unlimited)
	fl.DurationVar(&lim.GuardWindow, "guard-window", lim.GuardWindow, "the mass-change guard's window")
	fl.Float64Var(&lim.GuardShare, "guard-share", lim.GuardShare, "the mass-change guard lets at most this share of the managed guests (or --guard-min, the larger) be shut down, stopped, rebooted, migrated or destroyed within --guard-window; the rest are held until \"converge approve\"")
	fl.IntVar(&lim.GuardMin, "guard-min", lim.GuardMin, "the mass-change guard's threshold is never below this many guests")
	fl.Var(&limitInt{n: &lim.CloneConcurrency, unlimited: &lim.CloneConcurrencyUnlimited, name: "clone-concurrency", note: note}, "clone-concurrency",
		"most VM clones at once per storage, full or linked, whose lock each takes (a container template clones one at a time instead)"+unlimited)
	fl.Var(&limitInt{n: &lim.CreateRate, unlimited: &lim.CreateRateUnlimited, name: "create-rate", note: note}, "create-rate",
		"most clones started per minute across the cluster"+unlimited)
	fl.IntVar(&lim.MaxGuests, "max-guests", 0, "most managed guests that exist or are being created; beyond it creations wait (0: no cap)")
	fl.BoolVar(&pol.CreatePools, "create-pools", false, "create a desired resource pool that does not exist (otherwise moving a guest into it fails, saying so); give it to planners and executors alike")
	fl.IntVar(&pol.SnapshotKeep, "snapshot-keep", 0, "keep at most this many protective snapshots (snapshot_before) per guest, pruning the oldest (0: keep all); give it to planners and executors alike")
	fl.BoolVar(&pol.AllowDestroy, "allow-destroy", false, "destroy the guests converge created when their desired state says absent (any other guest only after \"converge approve VMID\"; never a protected one); give it to planners and executors alike")
	fl.BoolVar(&pol.ObserveOnly, "observe-only", false, "plan and report, never act")
	fl.DurationVar(&pol.ShutdownTimeout, "shutdown-timeout", pol.ShutdownTimeout, "graceful shutdown time before a guest is stopped hard")
}

// config is the process configuration the flags describe, for roles, with
// the global settings and what follows another setting by default; not
// yet validated.
func (f *roleFlags) config(g *globals, roles app.Roles, log zerolog.Logger) app.Config {
	cfg := f.derived()
	bc := g.busConfig("", log)
	bc.MaxAge, bc.MaxBytes = cfg.Bus.MaxAge, cfg.Bus.MaxBytes
	cfg.Cluster, cfg.Roles, cfg.Bus, cfg.Logger = g.cluster, roles, bc, log
	return cfg
}

// derived is the flags' configuration with what follows another setting
// by default: the planners' lease TTL is the executors' (--lease-ttl),
// the verification refresh, the planner's observer timeout and
// readiness's Proxmox freshness follow --observe-interval.
func (f *roleFlags) derived() app.Config {
	cfg := f.cfg
	cfg.Planner.LeaseTTL = cfg.Executor.LeaseTTL
	if !f.configRefresh.set {
		cfg.Observer.ConfigRefresh = cfg.Observer.Interval
	}
	cfg.FollowObserveInterval()
	return cfg
}

// appConfig is the process configuration the flags describe, checked.
func (f *roleFlags) appConfig(g *globals, roles app.Roles, log zerolog.Logger) (app.Config, error) {
	if err := f.validate(); err != nil {
		return app.Config{}, usageError{err}
	}
	return f.config(g, roles, log), nil
}

// setup is what the process prepares before its roles start (app.Setup):
// the Proxmox settings (secret resolved and checked) when the roles need
// Proxmox, the tokens file, the trust (with extra keys trusted besides
// --trusted-keys) and the signing of /v1's desired state.
func (f *roleFlags) setup(g *globals, roles app.Roles, extra map[string]ed25519.PublicKey, log zerolog.Logger) (app.Setup, error) {
	s := app.Setup{HTTPTokens: f.httpTokens, BuiltinSim: f.builtinSim, WaitForProxmox: f.waitForProxmox}
	var err error
	if s.Trust, err = g.sign.auth(extra); err != nil {
		return s, err
	}
	if s.Sign, err = f.httpSign(); err != nil {
		return s, err
	}
	if roles.Observer || roles.Executor {
		if err := f.proxmox(log); err != nil {
			return s, err
		}
	}
	// No flag sets Proxmox's background_delay: it stays below the
	// request timeout (--pve-timeout).
	s.Proxmox = f.pve
	if f.nodeCallsUnlimited {
		s.Proxmox.NodeCalls = 0
	}
	s.Proxmox.ConfigTaskWait = pve.ConfigTaskWaitWithin(f.pve.Timeout)
	return s, nil
}

// unlimitedNote ends the help of a limit that takes "unlimited".
const unlimitedNote = " (unlimited: no limit; a negative value, deprecated, is unlimited too)"

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

// proxmox completes and checks the Proxmox settings: the secret from its
// file or variable, and what only the flags can name.
func (f *roleFlags) proxmox(log zerolog.Logger) error {
	if f.pve.URL == "" {
		return usageError{fmt.Errorf("no Proxmox configured: give %s and an API token (--pve-token-id and --pve-token-secret-file), or use `converge up --sim`", flagRef("pve-url"))}
	}
	if f.flags != nil && !f.builtinSim {
		s, err := f.pveSecret.Resolve(f.flags, log)
		if err != nil {
			return err
		}
		f.pve.TokenSecret = s
	}
	if err := checkPVE(f.pve); err != nil {
		return usageError{err}
	}
	return nil
}

// start prepares cfg with s and says why it could not, naming the flags.
func start(ctx context.Context, s app.Setup, cfg *app.Config) error {
	err := s.Apply(ctx, cfg)
	if errors.Is(err, app.ErrSetting) {
		return usageError{flagError(err)}
	}
	return err
}

// logDeprecated warns about each setting given in a deprecated form.
func (f *roleFlags) logDeprecated(log zerolog.Logger) {
	for _, d := range f.deprecated {
		log.Warn().Msg(d)
	}
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
			if roles.API && f.cfg.HTTP == "" {
				return usageError{errors.New("the api role serves the HTTP API: give it " + flagRef("http") + " (e.g. 0.0.0.0:8080 with --http-tokens and TLS)")}
			}
			f.logDeprecated(log)
			cfg, err := f.appConfig(g, roles, log)
			if err != nil {
				return err
			}
			setup, err := f.setup(g, roles, nil, log)
			if err != nil {
				return err
			}
			if err := start(cmd.Context(), setup, &cfg); err != nil {
				return err
			}
			log.Info().Str("role", role).Str("cluster", g.cluster).Msg("starting")
			return g.natsAuthHint(app.Run(cmd.Context(), cfg))
		},
	}
	addRoleFlags(cmd, f, "")
	g.check(cmd, f.validate)
	g.warnDeprecated(cmd, &f.deprecated)
	return cmd
}
