// Command converge is the converge reconciler's single binary: every role,
// the Proxmox VE simulator and the operator CLI (docs/configuration.md).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
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
// (docs/benchmarks-history.md: latency p50 5–6.5 → 1.4 ms at 1,000 changes/s).
const defaultGCPercent = 400

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
	ctx, stop := interrupts(func() {
		fmt.Fprintln(os.Stderr, "converge: second interrupt: exiting now, without draining")
		os.Exit(exitInterrupted)
	}, time.Now)
	defer stop()
	err := newRoot().ExecuteContext(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "converge:", err)
		os.Exit(codeOf(err))
	}
}

// duplicateSignal is how soon after the first interrupt a second one is
// taken for the same: `timeout -s INT` and some supervisors deliver it
// twice at once, while a person's second Ctrl-C comes later.
const duplicateSignal = time.Second

// interrupts is a context that ends at the first SIGINT or SIGTERM; a
// second one, duplicateSignal or more later by now, calls force (a process
// draining its in-flight actions can be told to go at once).
func interrupts(force func(), now func() time.Time) (context.Context, func()) {
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	ctx, stop := onInterrupts(ch, force, now)
	return ctx, func() { signal.Stop(ch); stop() }
}

// onInterrupts is interrupts reading the signals from ch.
func onInterrupts(ch <-chan os.Signal, force func(), now func() time.Time) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		var first time.Time
		for {
			select {
			case <-ch:
			case <-done:
				return
			}
			t := now()
			switch {
			case first.IsZero():
				first = t
				cancel()
			case t.Sub(first) >= duplicateSignal:
				force()
				return
			}
		}
	}()
	return ctx, func() { close(done); cancel() }
}

// exitCode is an error with a specific process exit status.
type exitCode struct {
	code int
	err  error
}

func (e exitCode) Error() string { return e.err.Error() }
func (e exitCode) Unwrap() error { return e.err }

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
	logFormat    string
	// settings are the effective configuration and where each value
	// came from (config.go).
	settings []setting
	// checks are the commands' own settings checks, run with the global
	// ones before anything starts (validate.go).
	checks map[*cobra.Command]func() error
	// deprecated are the commands' settings given in a deprecated form
	// (flagvalues.go), for config print to warn about.
	deprecated map[*cobra.Command]*[]string
}

// check registers cmd's settings check, run by validate.
func (g *globals) check(cmd *cobra.Command, f func() error) {
	if g.checks == nil {
		g.checks = map[*cobra.Command]func() error{}
	}
	g.checks[cmd] = f
}

// warnDeprecated registers where cmd notes settings given in a deprecated
// form.
func (g *globals) warnDeprecated(cmd *cobra.Command, notes *[]string) {
	if g.deprecated == nil {
		g.deprecated = map[*cobra.Command]*[]string{}
	}
	g.deprecated[cmd] = notes
}

// defaultData is --data's default.
const defaultData = "converge-data"

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "converge",
		Short:         "Keep Proxmox VE guests in the state other services ask for",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version(),
	}
	pf := root.PersistentFlags()
	pf.String(configFlag, "", "YAML file of settings keyed by long flag name; the command line and the environment override it (env CONVERGE_CONFIG; docs/configuration.md)")
	pf.StringVarP(&g.output, "output", "o", "text", "output format: text, json, or jsonl (one JSON object per line; history and replay only, the other commands print one document and refuse it)")
	pf.StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	pf.StringVar(&g.logFormat, "log-format", "auto", "log format: json, console, or auto (console on a terminal, JSON otherwise)")
	pf.StringVar(&g.natsURL, "nats", "", "NATS server URLs, comma-separated (env CONVERGE_NATS or CONVERGE_NATS_URL; \"up\" takes it from its command line only)")
	pf.StringVar(&g.cluster, "cluster", events.DefaultCluster, "Proxmox cluster id")
	g.sign.register(root)
	pf.StringVar(&g.data, "data", defaultData, "data directory of \"converge up\" (its embedded journal, and the NATS and HTTP credentials it generates; other commands read the NATS ones from it)")
	pf.StringVar(&g.natsUser, "nats-user", "", "NATS user")
	g.natsPassword = secret.Flag{Name: "nats-password", Env: "CONVERGE_NATS_PASSWORD", Usage: "NATS password"}
	g.natsPassword.Register(pf)
	pf.StringVar(&g.natsCred, "nats-creds", "", "NATS credentials file")
	pf.StringVar(&g.natsNKey, "nats-nkey", "", "NATS nkey seed file")
	pf.StringVar(&g.natsCA, "nats-ca", "", "CA file for NATS TLS")
	pf.StringVar(&g.natsCert, "nats-cert", "", "client certificate for NATS TLS")
	pf.StringVar(&g.natsKey, "nats-key", "", "client key for NATS TLS")
	pf.StringVar(&g.stream, "stream", bus.DefaultStream, "JetStream stream of the journal")
	pf.StringVar(&g.bucket, "bucket", bus.DefaultBucket, "KV bucket of the materialised views")
	pf.IntVar(&g.replicas, "replicas", 1, "replicas of the journal stream and the views bucket, 1..5; 3 on a 3-node NATS cluster")
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		if cmd.Annotations[annotNoConfig] != "" {
			return nil // config print applies the configuration to another command
		}
		var err error
		if g.settings, err = applyConfig(cmd); err != nil {
			return usageError{err}
		}
		if err := g.validate(cmd); err != nil {
			return usageError{err}
		}
		return g.resolveSecrets(cmd)
	}
	root.AddCommand(newSimCmd(g), newUpCmd(g), newRoleCmd(g, "observer"), newRoleCmd(g, "planner"), newRoleCmd(g, "executor"), newRoleCmd(g, "api"), newNotifyCmd(g),
		newDesireCmd(g), newStatusCmd(g), newWaitCmd(g), newPlanCmd(g), newResyncCmd(g), newBenchCmd(g), newNATSNodeCmd(g),
		newHistoryCmd(g), newReplayCmd(g), newRebuildCmd(g), newProvisionCmd(g), newKeygenCmd(),
		newApproveCmd(g), newPauseCmd(g), newImportCmd(g), newResumeCmd(g), newReleaseCmd(g), newRollbackCmd(g), newConfigCmd(g), newVersionCmd())
	finishRoot(root)
	addCompletions(root, g)
	return root
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

// annotJSONL marks the commands that print a stream of records and so
// can write them one JSON object per line (-o jsonl).
const annotJSONL = "converge/jsonl"

// busConfig is the NATS configuration from the global flags. Without
// credential flags, the admin credentials `converge up` generated under
// --data are used, if there are any: the CLI on up's host needs no flags.
func (g *globals) busConfig(name string, log zerolog.Logger) bus.Config {
	c := bus.DefaultConfig()
	c.URLs, c.Name, c.User, c.Password, c.CredsFile, c.NKeyFile = g.natsURL, name, g.natsUser, g.natsPass, g.natsCred, g.natsNKey
	c.TLSCA, c.TLSCert, c.TLSKey, c.Stream, c.Bucket, c.Replicas, c.Logger = g.natsCA, g.natsCert, g.natsKey, g.stream, g.bucket, g.replicas, log
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
	return g.connectWith(ctx, name, nil)
}

// connectWith is connect with adjust (if any) applied to the bus's Config.
func (g *globals) connectWith(ctx context.Context, name string, adjust func(*bus.Config)) (*bus.Bus, error) {
	if g.natsURL == "" {
		g.natsURL = "nats://127.0.0.1:4222" // where `converge up` listens by default
	}
	log, err := g.logger()
	if err != nil {
		return nil, err
	}
	c := g.busConfig(name, log)
	if adjust != nil {
		adjust(&c)
	}
	b, err := bus.Connect(ctx, c)
	return b, g.natsAuthHint(err)
}

// natsAuthHint adds to a NATS connection that failed at start what to
// check: for NATS refusing the credentials, which ones converge sent (or
// that it sent none, and where it looked for `converge up`'s) and how to
// give others; for no server answering, whether `converge up` runs and
// which --nats to give. Other errors are returned as they are. It names
// files and flags, never a secret.
func (g *globals) natsAuthHint(err error) error {
	if errors.Is(err, nats.ErrNoServers) {
		if g.natsURL == "" || g.natsURL == "nats://"+defaultNATSListen {
			return fmt.Errorf("%w\nNothing answers at nats://%s, where `converge up` listens by default: is `converge up` running on this host "+
				"(with its default --nats-listen)? Start it, or pass --nats (or CONVERGE_NATS) with the URL of your NATS server "+
				"or of the --nats-listen address `converge up` was given", err, defaultNATSListen)
		}
		return fmt.Errorf("%w\nIs the NATS server named by --nats (CONVERGE_NATS) running and reachable from here? "+
			"For `converge up`, --nats must name its --nats-listen address (default nats://%s)", err, defaultNATSListen)
	}
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		return err
	}
	const how = "--nats-user with --nats-password-file (CONVERGE_NATS_USER, CONVERGE_NATS_PASSWORD_FILE or CONVERGE_NATS_PASSWORD), --nats-creds or --nats-nkey"
	const upData = "run where `converge up` keeps its data, or pass --data DIR (CONVERGE_DATA) naming its data directory"
	switch {
	case g.natsCred != "":
		return fmt.Errorf("%w\nNATS refused the credentials file %s (--nats-creds): check it, or give others (%s); for `converge up`'s NATS give none and %s",
			err, g.natsCred, how, upData)
	case g.natsNKey != "":
		return fmt.Errorf("%w\nNATS refused the nkey %s (--nats-nkey): check it, or give others (%s); for `converge up`'s NATS give none and %s",
			err, g.natsNKey, how, upData)
	case g.natsUser != "":
		return fmt.Errorf("%w\nNATS refused user %q (--nats-user) with the password given (--nats-password-file or CONVERGE_NATS_PASSWORD): "+
			"check them, or give others (%s); for `converge up`'s NATS give none and %s", err, g.natsUser, how, upData)
	}
	file := filepath.Join(g.data, natsauth.CredentialsFile)
	if _, ok, _ := natsauth.Load(g.data); ok {
		return fmt.Errorf("%w\nNATS refused the admin credentials `converge up` wrote in %s (found through --data %s): are they another `converge up`'s? "+
			"For this NATS give its own (%s); for another `converge up`, %s", err, file, g.data, how, upData)
	}
	return fmt.Errorf("%w\nNATS refused the connection: converge sent no credentials, as none were given and `converge up`'s are not under --data %s (no %s). "+
		"On `converge up`'s host, %s; for another NATS give %s", err, g.data, file, upData, how)
}
