package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/converge-pve/converge/executor"
	"github.com/converge-pve/converge/internal/api"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/control"
	"github.com/converge-pve/converge/internal/observer"
	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
)

// roleFlags configure the reconciler roles.
type roleFlags struct {
	http            string
	observeInterval time.Duration
	configRefresh   time.Duration
	pve             pve.Config
	pveTimeout      time.Duration
	concurrency     int
	ackWait         time.Duration
	leaseTTL        time.Duration
	checkpointEvery time.Duration
	retentionAge    time.Duration
	retentionBytes  int64
	observedTTL     time.Duration
	noReboot        bool
	observeOnly     bool
	shutdownTimeout time.Duration
	name            string
}

func addRoleFlags(cmd *cobra.Command, f *roleFlags, httpDefault string) {
	fl := cmd.Flags()
	host, _ := os.Hostname()
	fl.StringVar(&f.name, "name", host, "this instance's name in events and logs")
	fl.StringVar(&f.http, "http", httpDefault, "serve /metrics, /healthz, /readyz and /v1 on this host:port (empty: off)")
	fl.DurationVar(&f.observeInterval, "observe-interval", 10*time.Second, "how often the observer polls Proxmox")
	fl.DurationVar(&f.configRefresh, "config-refresh", 5*time.Minute, "re-read every guest's config at least this often (drift invisible in the inventory)")
	fl.StringVar(&f.pve.URL, "pve-url", os.Getenv("PVE_URL"), "Proxmox VE API URL, e.g. https://pve1:8006 (env PVE_URL)")
	fl.StringVar(&f.pve.TokenID, "pve-token-id", os.Getenv("PVE_TOKEN_ID"), "API token id user@realm!name (env PVE_TOKEN_ID)")
	fl.StringVar(&f.pve.TokenSecret, "pve-token-secret", os.Getenv("PVE_TOKEN_SECRET"), "API token secret (env PVE_TOKEN_SECRET)")
	fl.StringVar(&f.pve.Fingerprint, "pve-fingerprint", os.Getenv("PVE_FINGERPRINT"), "pin the Proxmox certificate's SHA-256 fingerprint")
	fl.StringVar(&f.pve.CAFile, "pve-ca", os.Getenv("PVE_CA"), "CA file for the Proxmox certificate")
	fl.BoolVar(&f.pve.Insecure, "pve-insecure", false, "do not verify the Proxmox certificate (dangerous)")
	fl.DurationVar(&f.pveTimeout, "pve-timeout", 30*time.Second, "timeout of one Proxmox API request")
	fl.IntVar(&f.concurrency, "executor-concurrency", 64, "actions an executor runs at once")
	fl.DurationVar(&f.ackWait, "ack-wait", executor.DefaultAckWait, "how long an action may go without a heartbeat before another executor may take it")
	fl.DurationVar(&f.retentionAge, "retention-age", 0, "keep journal events this long (0: no age limit); set the same on every role, each provisions the stream")
	fl.Int64Var(&f.retentionBytes, "retention-bytes", 0, "keep at most this many bytes of journal, oldest dropped first (0: no size limit)")
	fl.DurationVar(&f.observedTTL, "observed-retention", 0, "keep observed snapshots and heartbeats this long (0: as long as the journal); each guest's newest snapshot is republished at half this term, so it never expires")
	fl.DurationVar(&f.checkpointEvery, "checkpoint-interval", 5*time.Minute, "how often the planner checkpoints its fold while it advances (and on shutdown); negative: never")
	fl.DurationVar(&f.leaseTTL, "lease-ttl", executor.DefaultLeaseTTL, "how long a silent executor or planner keeps its partitions before others take them over")
	fl.BoolVar(&f.noReboot, "no-reboot", false, "never reboot guests to apply pending config (they stay pending)")
	fl.BoolVar(&f.observeOnly, "observe-only", false, "plan and report, never act")
	fl.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 60*time.Second, "graceful shutdown time before a guest is stopped hard")
}

// retention applies the journal limits to the bus configuration of a
// process that provisions the stream.
func (f *roleFlags) retention(c bus.Config) bus.Config {
	c.MaxAge, c.MaxBytes = f.retentionAge, f.retentionBytes
	return c
}

func (f *roleFlags) pveClient(log zerolog.Logger) (*pve.Client, error) {
	if f.pve.URL == "" {
		return nil, errors.New("no Proxmox configured: set --pve-url (PVE_URL) and an API token (--pve-token-id/--pve-token-secret), or use `converge up --sim`")
	}
	if f.pve.Insecure {
		log.Warn().Str("url", f.pve.URL).Msg("TLS VERIFICATION OF PROXMOX IS OFF (--pve-insecure): anyone on the path can impersonate Proxmox and read the API token; use --pve-fingerprint or --pve-ca")
	}
	cfg := f.pve
	cfg.Timeout = f.pveTimeout
	cfg.Logger = log
	return pve.New(cfg)
}

// roles says which roles a process runs.
type roles struct{ observer, planner, executor bool }

// runRoles runs the selected roles against a connected bus until ctx ends,
// then stops them: the observer and planner at once, the executor after
// finishing its in-flight actions.
func runRoles(ctx context.Context, g *globals, f *roleFlags, which roles, b *bus.Bus, px *pve.Client, controlConn *nats.Conn, log zerolog.Logger) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := b.Provision(ctx); err != nil {
		return err
	}
	var (
		wg      sync.WaitGroup
		errOnce sync.Once
		first   error
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	run := func(name string, fn func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(ctx); err != nil && !errors.Is(err, context.Canceled) {
				log.Error().Err(err).Str("role", name).Msg("role stopped")
				errOnce.Do(func() { first = fmt.Errorf("%s: %w", name, err) })
				cancel()
			}
		}()
	}
	var ready []func() error
	var obs *observer.Observer
	// own gives a role a connection of its own (see bus.Bus.Another).
	own := func(role string) (*bus.Bus, error) {
		rb, err := b.Another(ctx, role+"@"+f.name)
		if err != nil {
			return nil, err
		}
		go func() { <-ctx.Done(); wg.Wait(); rb.Close() }()
		return rb, nil
	}
	if which.observer {
		b := b
		if which.planner || which.executor {
			var err error
			if b, err = own("observer"); err != nil {
				return err
			}
		}
		var err error
		obs, err = observer.New(observer.Config{Cluster: g.cluster, Name: "observer@" + f.name, Interval: f.observeInterval,
			ConfigRefresh: f.configRefresh, ObservedTTL: f.observedTTL, Logger: log.With().Str("role", "observer").Logger()}, px, b)
		if err != nil {
			return err
		}
		run("observer", obs.Run)
	}
	if which.planner {
		b := b
		if which.observer || which.executor {
			var err error
			if b, err = own("planner"); err != nil {
				return err
			}
		}
		pol := planner.Policy{ObserverTimeout: 3 * f.observeInterval, ObserveOnly: f.observeOnly, ShutdownTimeout: f.shutdownTimeout}
		if f.noReboot {
			no := false
			pol.RebootForPending = &no
		}
		svc, err := planner.NewService(planner.ServiceConfig{Cluster: g.cluster, Name: "planner@" + f.name, Policy: pol, LeaseTTL: f.leaseTTL, CheckpointInterval: f.checkpointEvery,
			Registerer: reg, Logger: log.With().Str("role", "planner").Logger()}, b)
		if err != nil {
			return err
		}
		run("planner", svc.Run)
		ready = append(ready, func() error {
			if !svc.Ready() {
				return errors.New("planner is still folding the journal")
			}
			return nil
		})
	}
	if which.executor {
		b := b
		if which.observer || which.planner {
			var err error
			if b, err = own("executor"); err != nil {
				return err
			}
		}
		ex, err := executor.New(executor.Config{Cluster: g.cluster, Name: "executor@" + f.name, Concurrency: f.concurrency,
			AckWait: f.ackWait, LeaseTTL: f.leaseTTL, Logger: log.With().Str("role", "executor").Logger()}, px, b)
		if err != nil {
			return err
		}
		run("executor", ex.Run)
	}
	if controlConn != nil {
		run("control", func(ctx context.Context) error {
			return control.Run(ctx, controlConn, g.cluster, control.Handlers{Resync: func() {
				if obs != nil {
					obs.Resync()
				}
			}}, log)
		})
	}
	if f.http != "" {
		kv, err := b.Views(ctx)
		if err != nil {
			return err
		}
		srv := &http.Server{Addr: f.http, ReadHeaderTimeout: 10 * time.Second, Handler: (&api.Server{
			Cluster: g.cluster, Views: views.Reader{KV: kv, Cluster: g.cluster}, JS: b.JS, NC: b.NC, Gatherer: reg,
			Logger: log.With().Str("role", "http").Logger(),
			Ready: func() error {
				for _, r := range ready {
					if err := r(); err != nil {
						return err
					}
				}
				return nil
			},
		}).Handler()}
		ln, err := net.Listen("tcp", f.http)
		if err != nil {
			return fmt.Errorf("--http %s: %w", f.http, err)
		}
		log.Info().Str("addr", ln.Addr().String()).Msg("HTTP API listening")
		run("http", func(ctx context.Context) error {
			go func() {
				<-ctx.Done()
				sctx, c := context.WithTimeout(context.Background(), 5*time.Second)
				defer c()
				_ = srv.Shutdown(sctx)
			}()
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		})
	}
	wg.Wait()
	return first
}

// newRoleCmd runs one role against an existing NATS (--nats).
func newRoleCmd(g *globals, role string) *cobra.Command {
	f := &roleFlags{}
	cmd := &cobra.Command{
		Use:   role,
		Short: "Run the " + role + " role against an existing NATS JetStream (--nats)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			if g.natsURL == "" {
				return errors.New("the " + role + " role needs --nats (or CONVERGE_NATS_URL); `converge up` runs every role with an embedded server")
			}
			which := roles{observer: role == "observer", planner: role == "planner", executor: role == "executor"}
			var px *pve.Client
			if which.observer || which.executor {
				if px, err = f.pveClient(log); err != nil {
					return err
				}
			}
			ctx := cmd.Context()
			b, err := bus.Connect(ctx, f.retention(g.busConfig(role+"@"+f.name, log)))
			if err != nil {
				return err
			}
			defer b.Close()
			var cc *nats.Conn
			if which.observer {
				cb, err := bus.Connect(ctx, g.busConfig(role+"-control@"+f.name, log))
				if err != nil {
					return err
				}
				cc = cb.NC
			}
			log.Info().Str("role", role).Str("cluster", g.cluster).Msg("starting")
			return runRoles(ctx, g, f, which, b, px, cc, log)
		},
	}
	addRoleFlags(cmd, f, "")
	return cmd
}
