// Command converge is the converge reconciler's single binary: every role,
// the Proxmox VE simulator and the operator CLI (DESIGN.md §3).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/natsauth"
	"github.com/converge-pve/converge/internal/secret"
)

// defaultGCPercent is the garbage collector's target when GOGC is unset.
// Go's default (100) collects every time the heap doubles; converge's roles
// allocate per event and their live heap is small (about 2 KB per guest in
// the planner), so collecting 4× less often costs little memory and takes
// GC mark phases, which stall a 2-core host, out of most changes' way
// (docs/benchmarks-history-2026-11-22.md: latency p50 5–6.5 → 1.4 ms at 1,000 changes/s).
const defaultGCPercent = 400

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := newRoot().ExecuteContext(ctx)
	var ec exitCode
	switch {
	case errors.As(err, &ec):
		fmt.Fprintln(os.Stderr, "converge:", ec.err)
		os.Exit(ec.code)
	case err != nil:
		fmt.Fprintln(os.Stderr, "converge:", err)
		os.Exit(1)
	}
}

// exitCode is an error with a specific process exit status.
type exitCode struct {
	code int
	err  error
}

func (e exitCode) Error() string { return e.err.Error() }

// globals are the flags every command takes.
type globals struct {
	output   string
	logLevel string
	natsURL  string
	cluster  string
	natsUser string
	natsPass string
	sign     signFlags
	// data is `up`'s data directory, where client commands find the
	// credentials of its embedded NATS.
	data string
	// natsPassword is where natsPass comes from (file, env or flag),
	// resolved before any command runs.
	natsPassword secret.Flag
	natsCred     string
	natsNKey     string
	natsCA       string
	natsCert     string
	natsKey      string
	stream       string
	bucket       string
	replicas     int
	// replicasEnv is CONVERGE_REPLICAS when it is not a number, reported
	// before any command runs.
	replicasEnv string
}

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "converge",
		Short:         "Keep Proxmox VE guests in the state other services ask for",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	pf := root.PersistentFlags()
	pf.StringVarP(&g.output, "output", "o", "text", "output format: text, json, or jsonl (one JSON object per line; history and replay only, the other commands print one document and refuse it)")
	pf.StringVar(&g.logLevel, "log-level", envOr("CONVERGE_LOG_LEVEL", "info"), "log level: debug, info, warn, error (env CONVERGE_LOG_LEVEL)")
	pf.StringVar(&g.natsURL, "nats", os.Getenv("CONVERGE_NATS_URL"), "NATS server URLs, comma-separated (env CONVERGE_NATS_URL)")
	pf.StringVar(&g.cluster, "cluster", envOr("CONVERGE_CLUSTER", events.DefaultCluster), "Proxmox cluster id (env CONVERGE_CLUSTER)")
	g.sign.register(root)
	pf.StringVar(&g.data, "data", envOr("CONVERGE_DATA", "converge-data"), "data directory of `converge up` (its embedded journal, and the NATS and HTTP credentials it generates; other commands read the NATS ones from it) (env CONVERGE_DATA)")
	pf.StringVar(&g.natsUser, "nats-user", os.Getenv("CONVERGE_NATS_USER"), "NATS user (env CONVERGE_NATS_USER)")
	g.natsPassword = secret.Flag{Name: "nats-password", Env: "CONVERGE_NATS_PASSWORD", Usage: "NATS password"}
	g.natsPassword.Register(pf)
	pf.StringVar(&g.natsCred, "nats-creds", os.Getenv("CONVERGE_NATS_CREDS"), "NATS credentials file (env CONVERGE_NATS_CREDS)")
	pf.StringVar(&g.natsNKey, "nats-nkey", os.Getenv("CONVERGE_NATS_NKEY"), "NATS nkey seed file (env CONVERGE_NATS_NKEY)")
	pf.StringVar(&g.natsCA, "nats-ca", os.Getenv("CONVERGE_NATS_CA"), "CA file for NATS TLS (env CONVERGE_NATS_CA)")
	pf.StringVar(&g.natsCert, "nats-cert", os.Getenv("CONVERGE_NATS_CERT"), "client certificate for NATS TLS")
	pf.StringVar(&g.natsKey, "nats-key", os.Getenv("CONVERGE_NATS_KEY"), "client key for NATS TLS")
	pf.StringVar(&g.stream, "stream", envOr("CONVERGE_STREAM", bus.DefaultStream), "JetStream stream of the journal")
	pf.StringVar(&g.bucket, "bucket", envOr("CONVERGE_BUCKET", bus.DefaultBucket), "KV bucket of the materialised views")
	replicas, err := strconv.Atoi(envOr("CONVERGE_REPLICAS", "1"))
	if err != nil {
		g.replicasEnv, replicas = os.Getenv("CONVERGE_REPLICAS"), 1
	}
	pf.IntVar(&g.replicas, "replicas", replicas, "replicas of the journal stream and the views bucket, 1..5; 3 on a 3-node NATS cluster (env CONVERGE_REPLICAS)")
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		if err := g.validateOutput(); err != nil {
			return err
		}
		if err := g.validateJSONL(cmd); err != nil {
			return err
		}
		if err := g.validateReplicas(cmd); err != nil {
			return err
		}
		if err := g.resolveSecrets(cmd); err != nil {
			return err
		}
		return events.ValidateCluster(g.cluster)
	}
	root.AddCommand(newSimCmd(g), newUpCmd(g), newRoleCmd(g, "observer"), newRoleCmd(g, "planner"), newRoleCmd(g, "executor"),
		newDesireCmd(g), newStatusCmd(g), newWaitCmd(g), newPlanCmd(g), newResyncCmd(g), newBenchCmd(g), newNATSNodeCmd(g),
		newHistoryCmd(g), newReplayCmd(g), newRebuildCmd(g), newProvisionCmd(g), newKeygenCmd(),
		newApproveCmd(g), newPauseCmd(g), newResumeCmd(g), newReleaseCmd(g))
	return root
}

func (g *globals) logger() (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(g.logLevel)
	if err != nil {
		return zerolog.Nop(), fmt.Errorf("--log-level: %w", err)
	}
	// Timestamps carry milliseconds: zerolog's default field format has
	// whole seconds, which the console writer would print as .000.
	zerolog.TimeFieldFormat = time.RFC3339Nano
	return zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: "15:04:05.000"}).Level(lvl).With().Timestamp().Logger(), nil
}

// resolveSecrets reads the NATS password from its file, warning when it
// was given on the command line.
func (g *globals) resolveSecrets(cmd *cobra.Command) error {
	log, err := g.logger()
	if err != nil {
		return err
	}
	g.natsPass, err = g.natsPassword.Resolve(cmd.Flags(), log)
	return err
}

func (g *globals) validateReplicas(cmd *cobra.Command) error {
	if g.replicasEnv != "" && !cmd.Flags().Changed("replicas") {
		return fmt.Errorf("CONVERGE_REPLICAS=%q is not a number", g.replicasEnv)
	}
	if g.replicas < 1 || g.replicas > 5 {
		return fmt.Errorf("--replicas must be within 1..5, got %d", g.replicas)
	}
	return nil
}

// annotJSONL marks the commands that print a stream of records and so
// can write them one JSON object per line (-o jsonl).
const annotJSONL = "converge/jsonl"

func (g *globals) validateOutput() error {
	switch g.output {
	case "text", "json", "jsonl":
		return nil
	}
	return fmt.Errorf("-o must be text, json or jsonl, got %q", g.output)
}

// validateJSONL refuses -o jsonl for commands that print one document.
func (g *globals) validateJSONL(cmd *cobra.Command) error {
	if g.output == "jsonl" && cmd.Annotations[annotJSONL] == "" {
		return fmt.Errorf("-o jsonl (one JSON object per line) is for `converge history` and `converge replay`; %s prints one document: use -o json", cmd.CommandPath())
	}
	return nil
}

// busConfig is the NATS configuration from the global flags. Without
// credential flags, the admin credentials `converge up` generated under
// --data are used, if there are any: the CLI on up's host needs no flags.
func (g *globals) busConfig(name string, log zerolog.Logger) bus.Config {
	c := bus.Config{URLs: g.natsURL, Name: name, User: g.natsUser, Password: g.natsPass, CredsFile: g.natsCred,
		NKeyFile: g.natsNKey, TLSCA: g.natsCA, TLSCert: g.natsCert, TLSKey: g.natsKey, Stream: g.stream, Bucket: g.bucket,
		Replicas: g.replicas, Logger: log}
	if c.User == "" && c.CredsFile == "" && c.NKeyFile == "" {
		if creds, ok, err := natsauth.Load(g.data); err != nil {
			log.Warn().Err(err).Msg("NATS credentials under --data unreadable")
		} else if ok {
			c.User, c.Password = string(natsauth.Admin), creds[natsauth.Admin]
			log.Debug().Str("file", filepath.Join(g.data, natsauth.CredentialsFile)).Msg("NATS credentials of converge up")
		}
	}
	return c
}

// connect dials the NATS given by --nats, for the client commands.
func (g *globals) connect(ctx context.Context, name string) (*bus.Bus, error) {
	if g.natsURL == "" {
		g.natsURL = "nats://127.0.0.1:4222" // where `converge up` listens by default
	}
	log, err := g.logger()
	if err != nil {
		return nil, err
	}
	b, err := bus.Connect(ctx, g.busConfig(name, log))
	if err != nil && strings.Contains(strings.ToLower(err.Error()), "authorization") {
		return nil, fmt.Errorf("%w\nNATS refused the credentials: run where `converge up` keeps its data (or pass --data DIR / CONVERGE_DATA), or give --nats-user and --nats-password-file, --nats-creds or --nats-nkey", err)
	}
	return b, err
}

func envOr(key, def string) string {
	if v, ok := os.LookupEnv(key); ok && v != "" {
		return v
	}
	return def
}
