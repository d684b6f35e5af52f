package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/executor"
	"github.com/converge-pve/converge/internal/api"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/control"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/natsauth"
	"github.com/converge-pve/converge/internal/natsserver"
	"github.com/converge-pve/converge/internal/notify"
	"github.com/converge-pve/converge/internal/observer"
	"github.com/converge-pve/converge/internal/planloop"
	"github.com/converge-pve/converge/internal/views"
)

// App is a converge process: its NATS connections and the roles it runs.
type App struct {
	cfg Config
	log zerolog.Logger
	reg *prometheus.Registry

	srv  *server.Server // embedded, or nil
	b    *bus.Bus       // the process's main connection
	buss []*bus.Bus     // the roles' own connections

	obs    *observer.Observer
	plan   *planloop.Loop
	execs  []*executor.Executor
	router *control.Router
	notify *notify.Notifier
	http   *http.Server
	ln     net.Listener

	// conns are the roles' own connections, named for readiness; pxw
	// watches the inventory calls for it; rd computes /readyz.
	conns []probeConn
	pxw   *pxWatch
	rd    *readiness

	cancel context.CancelFunc
	wg     sync.WaitGroup
	errMu  sync.Mutex
	err    error
	// roles are the running roles' own cancels and completions (StopRole).
	roles map[string]*running
}

type running struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// Start validates cfg, starts the embedded NATS server if configured,
// connects, provisions the journal, and starts the configured roles in the
// background. Stop (or ctx ending) stops them; Wait waits for that.
func Start(ctx context.Context, cfg Config) (*App, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.wired()
	a := &App{cfg: cfg, log: cfg.Logger, reg: prometheus.NewRegistry()}
	a.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := a.connect(ctx); err != nil {
		a.close()
		return nil, err
	}
	if err := a.build(ctx); err != nil {
		a.close()
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	a.cancel = cancel
	a.start(rctx)
	return a, nil
}

// Run starts the roles and runs them until ctx ends or one fails; then it
// stops them (the executor after finishing its in-flight actions) and
// returns the first failure.
func Run(ctx context.Context, cfg Config) error {
	a, err := Start(ctx, cfg)
	if err != nil {
		return err
	}
	return a.Wait()
}

// connect starts the embedded server (if any), dials NATS and provisions
// the journal stream and the views bucket.
func (a *App) connect(ctx context.Context) error {
	bc := a.cfg.Bus
	if a.cfg.Embedded != nil {
		srv, err := natsserver.Start(*a.cfg.Embedded)
		if err != nil {
			return err
		}
		a.srv = srv
		// Loopback TCP where it is safe, else the in-process pipe
		// (natsserver.LocalURL says why and when).
		bc.InProcess = srv
		url, ok := natsserver.LocalURL(*a.cfg.Embedded, srv)
		if ok {
			bc.URLs, bc.InProcess = url, nil
		}
		a.log.Info().Str("url", srv.ClientURL()).Str("roles_via", cmp.Or(url, "in-process")).Str("data", a.cfg.Embedded.DataDir).Msg("embedded NATS JetStream running")
	}
	bc.Name = a.cfg.connName("converge")
	b, err := bus.Connect(ctx, bc)
	if err != nil {
		return err
	}
	a.b = b
	return b.Provision(ctx)
}

// own gives a role a connection of its own when the process runs more
// than one: one connection is read by one goroutine, and a role that
// receives a flood (the planner folding the journal) would otherwise starve
// another's subscription (the executor's heartbeats and actions).
func (a *App) own(ctx context.Context, name string, role natsauth.Role) (*bus.Bus, error) {
	if a.cfg.Roles.count() == 1 && a.cfg.Executors == 1 {
		return a.b, nil
	}
	b, err := a.b.Another(ctx, a.cfg.connName(name))
	if err != nil {
		return nil, err
	}
	a.buss = append(a.buss, b)
	a.conns = append(a.conns, connOf("journal:"+name, natsauth.ProbeSubject(role, a.cfg.Cluster), b))
	return b, nil
}

// plannerJournal is the planner's view of the journal: followed on its
// connection, actions published through an asynchronous window of their
// own.
type plannerJournal struct {
	journal.Follower
	journal.AsyncAppender
	kept // what retention does not drop (docs/retention.md)
}

// kept names the embedded journal.Kept, whose method has its name.
type kept = journal.Kept

// Planner's asynchronous publishes: a window large enough for a burst of
// actions, and a timeout after which a publish lost with a dying server is
// replanned (its msg-id and fence make that safe).
const (
	plannerPubWindow  = 4096
	plannerPubTimeout = 15 * time.Second
)

// build creates the roles, the control router and the HTTP server.
func (a *App) build(ctx context.Context) error {
	var err error
	a.router, err = control.New(a.cfg.Cluster, control.Handlers{Resync: func() {
		if a.obs != nil {
			a.obs.Resync()
		}
	}}, a.log, a.reg)
	if err != nil {
		return err
	}
	poison := a.router.Poison
	if a.cfg.Roles.Observer || a.cfg.Roles.Executor {
		a.pxw = &pxWatch{Proxmox: a.cfg.Proxmox, clock: a.cfg.Ready.Clock}
	}
	if a.cfg.Roles.Observer {
		ob, err := a.own(ctx, "observer", natsauth.Observer)
		if err != nil {
			return err
		}
		oc := a.cfg.Observer
		oc.Logger = a.log.With().Str("role", "observer").Logger()
		oc.Registerer = a.reg
		// Through the watch: its passes' inventory calls tell readiness
		// whether Proxmox answers.
		if a.obs, err = observer.New(oc, observerProxmox(a.pxw), ob); err != nil {
			return err
		}
	}
	if a.cfg.Roles.Planner {
		pb, err := a.own(ctx, "planner", natsauth.Planner)
		if err != nil {
			return err
		}
		async, err := pb.Async(plannerPubWindow, plannerPubTimeout)
		if err != nil {
			return err
		}
		store, err := pb.ViewStore()
		if err != nil {
			return err
		}
		pc := a.cfg.Planner
		pc.Registerer, pc.Poison = a.reg, poison
		// The limits hold across every planner of the cluster.
		ledger, err := pb.LimitsStore(ctx, a.cfg.Bus.Replicas)
		if err != nil {
			return fmt.Errorf("planner: %w", err)
		}
		pc.Ledger = ledger
		pc.Logger = a.log.With().Str("role", "planner").Logger()
		if a.plan, err = planloop.New(pc, plannerJournal{pb, async, pb}, store, pb.Checkpoints(), pb.LeaseStore); err != nil {
			return err
		}
	}
	em := a.registerShared()
	if em != nil && a.pxw != nil {
		a.pxw.hear(em.Answered)
	}
	if a.cfg.Roles.Executor {
		for i := range a.cfg.Executors {
			name := "executor"
			if a.cfg.Executors > 1 {
				name += "-" + strconv.Itoa(i)
			}
			eb, err := a.own(ctx, name, natsauth.Executor)
			if err != nil {
				return err
			}
			ec := a.cfg.Executor
			if a.cfg.Executors > 1 {
				ec.Name += "-" + strconv.Itoa(i)
			}
			ec.Poison, ec.Metrics = poison, em
			ec.Logger = a.log // the executor names its role itself
			ex, err := executor.New(ec, a.cfg.Proxmox, eb, eb.LeaseStore)
			if err != nil {
				return err
			}
			a.execs = append(a.execs, ex)
		}
	}
	if a.cfg.Notify != nil {
		// A connection of its own: its pulls are not to wait behind the
		// planner's flood.
		nb, err := a.b.Another(ctx, a.cfg.connName("notify"))
		if err != nil {
			return err
		}
		a.buss = append(a.buss, nb)
		if a.notify, err = notify.New(notify.Options{Config: *a.cfg.Notify, Cluster: a.cfg.Cluster, ViewsBucket: a.cfg.Bus.Bucket,
			JS: nb.JS, Replicas: a.cfg.Bus.Replicas, Registerer: a.reg, Logger: a.log.With().Str("role", "notify").Logger()}); err != nil {
			return err
		}
	}
	if a.cfg.HTTP != "" {
		return a.buildHTTP()
	}
	return nil
}

func (a *App) buildHTTP() error {
	store, err := a.b.ViewStore()
	if err != nil {
		return err
	}
	warn, err := a.cfg.HTTPAuth.check(a.cfg.HTTP)
	if err != nil {
		return err
	}
	if warn != "" {
		a.log.Warn().Str("addr", a.cfg.HTTP).Msg(warn)
	}
	a.rd = a.newReadiness()
	srv := &api.Server{
		Cluster: a.cfg.Cluster, Views: views.Reader{Store: store, Cluster: a.cfg.Cluster}, Journal: a.b,
		Gatherer: a.reg, Logger: a.log.With().Str("role", "http").Logger(),
		Checks: a.rd.checks,
		VerifyPeriod: func() time.Duration {
			if a.obs == nil {
				return 0
			}
			return a.obs.VerifyPeriod()
		},
		Guard:    a.cfg.HTTPAuth.Guard,
		Sign:     a.cfg.HTTPSign,
		Timeline: a.timeline,
	}
	a.http = a.cfg.HTTPAuth.Limits.Server(srv.Handler())
	// Streams never end by themselves: Shutdown would wait its whole
	// timeout on each open one.
	a.http.RegisterOnShutdown(srv.EndStreams)
	ln, err := net.Listen("tcp", a.cfg.HTTP)
	if err != nil {
		return fmt.Errorf("--http %s: %w", a.cfg.HTTP, err)
	}
	a.ln = a.cfg.HTTPAuth.Limits.Listener(ln)
	a.log.Info().Str("addr", a.ln.Addr().String()).Msg("HTTP API listening")
	return nil
}

// start runs every role in the background; the first to fail stops all.
func (a *App) start(ctx context.Context) {
	a.roles = map[string]*running{}
	run := func(name string, fn func(context.Context) error) {
		rctx, cancel := context.WithCancel(ctx)
		r := &running{cancel: cancel, done: make(chan struct{})}
		a.roles[name] = r
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			defer close(r.done)
			if err := fn(rctx); err != nil && !errors.Is(err, context.Canceled) {
				a.log.Error().Err(err).Str("role", name).Msg("role stopped")
				a.errMu.Lock()
				if a.err == nil {
					a.err = fmt.Errorf("%s: %w", name, err)
				}
				a.errMu.Unlock()
				a.cancel()
			}
		}()
	}
	run("control", func(ctx context.Context) error { return a.router.Run(ctx, a.b) })
	// The roles report poisoned messages through the router: it runs
	// before they start (or has failed, which stops the process).
	select {
	case <-a.router.Running():
	case <-a.roles["control"].done:
	case <-ctx.Done():
	}
	if a.obs != nil {
		run("observer", a.obs.Run)
	}
	if a.plan != nil {
		run("planner", a.plan.Run)
	}
	for i, ex := range a.execs {
		run("executor-"+strconv.Itoa(i), ex.Run)
	}
	if a.notify != nil {
		run("notify", a.notify.Run)
	}
	if a.rd != nil {
		run("ready", a.rd.run)
	}
	if a.http != nil {
		run("http", func(ctx context.Context) error {
			go func() {
				<-ctx.Done()
				sctx, c := context.WithTimeout(context.Background(), 5*time.Second)
				defer c()
				_ = a.http.Shutdown(sctx)
			}()
			serve := func() error { return a.http.Serve(a.ln) }
			if h := a.cfg.HTTPAuth; h.TLSCert != "" {
				serve = func() error { return a.http.ServeTLS(a.ln, h.TLSCert, h.TLSKey) }
			}
			if err := serve(); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		})
	}
}
