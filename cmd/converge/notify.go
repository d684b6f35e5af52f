package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/converge-pve/converge/internal/natsauth"
	"github.com/converge-pve/converge/internal/notify"
)

// notifyConfigFlag names the notifier's file on `notify` and `up`: the
// global --config is the settings file of every command.
const notifyConfigFlag = "notify-config"

// newNotifyCmd runs the notifier against an existing NATS, as NATS user
// notify (docs/notifications.md).
func newNotifyCmd(g *globals) *cobra.Command {
	var file, httpAddr string
	var ackWait time.Duration
	cmd := &cobra.Command{
		Use:   "notify",
		Short: "Send guests' errors, held actions, convergence, lost executors and roles not ready to webhooks (Slack, generic JSON), as NATS user notify",
		Long: `Routes converge's events to webhooks as --notify-config says (YAML:
routes, each with a url, a format (json or slack), triggers, headers whose
values come from the environment or files, retries, throttle, timeout).
Each route has its own durable consumers, so a receiver that fails never
delays another; a notice still refused after its retries is parked. See
docs/notifications.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			if file == "" {
				return usageError{errors.New("notify needs " + flagRef(notifyConfigFlag) + " FILE (docs/notifications.md)")}
			}
			cfg, err := notify.Load(file)
			if err != nil {
				return usageError{fmt.Errorf("--%s: %w", notifyConfigFlag, err)}
			}
			if g.natsUser == "" && g.natsCred == "" && g.natsNKey == "" {
				log.Info().Msg("no NATS user given: in production run the notifier as NATS user " + string(natsauth.Notify))
			}
			b, err := g.connect(cmd.Context(), "converge-notify")
			if err != nil {
				return err
			}
			defer b.Close()
			reg := prometheus.NewRegistry()
			reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
			n, err := notify.New(notify.Options{Config: cfg, Cluster: g.cluster, ViewsBucket: g.bucket, JS: b.JS,
				Replicas: g.replicas, AckWait: ackWait, Registerer: reg, Logger: log})
			if err != nil {
				return err
			}
			if httpAddr != "" {
				stop, err := serveMetrics(cmd.Context(), httpAddr, reg)
				if err != nil {
					return err
				}
				defer stop()
			}
			log.Info().Str("cluster", g.cluster).Strs("routes", cfg.Names()).Msg("notify: starting")
			if err := n.Run(cmd.Context()); err != nil && !errors.Is(err, cmd.Context().Err()) {
				return g.natsAuthHint(err)
			}
			log.Info().Msg("notify: stopped")
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&file, notifyConfigFlag, "", "the notifier's routes (YAML; docs/notifications.md)")
	fl.StringVar(&httpAddr, "http", "", "serve /metrics and /healthz on this host:port (empty: off)")
	fl.DurationVar(&ackWait, "notify-ack-wait", 10*time.Second, "how long a notice a killed notifier held waits before it is delivered again")
	return cmd
}

// serveMetrics serves reg on /metrics and 200 on /healthz until stop.
func serveMetrics(ctx context.Context, addr string, reg *prometheus.Registry) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--http %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}, nil
}
