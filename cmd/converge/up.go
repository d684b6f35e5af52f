package main

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/app"
	"github.com/converge-pve/converge/internal/natsauth"
	"github.com/converge-pve/converge/internal/natsserver"
	"github.com/converge-pve/converge/internal/notify"
	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/pvesim"
)

type upFlags struct {
	roleFlags
	sim       bool
	simListen string
	simGuests int
	simNodes  int
	// simResourcesLag is the simulator's pvestatd cycle.
	simResourcesLag time.Duration
	natsListen      string
	natsConfig      string
	simToken        string
	notifyConfig    string
}

func newUpCmd(g *globals) *cobra.Command {
	f := &upFlags{}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run every role in one process (embedded JetStream unless --nats is given)",
		Long: `Runs the observer, planner and executor in one process, with an embedded
NATS JetStream server (journal under --data) unless --nats on up's own
command line points at an existing one (CONVERGE_NATS_URL, meant for the
CLI commands, does not). With --sim, or when no Proxmox is configured, it
also runs the built-in Proxmox VE simulator with demo guests and prints its
credentials.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runUp(cmd, g, f) },
	}
	addRoleFlags(cmd, &f.roleFlags, "127.0.0.1:8080")
	fl := cmd.Flags()
	fl.BoolVar(&f.sim, "sim", false, "run the built-in Proxmox VE simulator and reconcile it")
	fl.StringVar(&f.simListen, "sim-listen", "127.0.0.1:8006", "where the simulator listens")
	fl.IntVar(&f.simGuests, "sim-guests", 12, "demo guests in the simulator")
	fl.IntVar(&f.simNodes, "sim-nodes", 3, "nodes in the simulator")
	fl.DurationVar(&f.simResourcesLag, "sim-resources-lag", pvesim.DefaultPvestatdCycle, "the simulator's pvestatd cycle: how often each node updates /cluster/resources (0: live)")
	fl.StringVar(&f.natsListen, "nats-listen", defaultNATSListen, "where the embedded NATS server listens, for other processes and the nats CLI")
	fl.StringVar(&f.simToken, "sim-token", "", "API token of the simulator as ID=SECRET (default: generated); lets you drive the simulator's Proxmox API yourself")
	fl.StringVar(&f.natsConfig, "nats-config", "", "nats-server config file for the embedded server (users, permissions, TLS)")
	fl.StringVar(&f.notifyConfig, notifyConfigFlag, "", "also run the notifier with these routes (YAML; docs/notifications.md)")
	g.check(cmd, f.validate)
	g.warnDeprecated(cmd, &f.deprecated)
	return cmd
}

// apiKeyID names up's API signing key in signatures.
const apiKeyID = "converge-api"

func runUp(cmd *cobra.Command, g *globals, f *upFlags) error {
	log, err := g.logger()
	if err != nil {
		return err
	}
	f.logDeprecated(log)
	// The notifier's file first: a mistake in it starts nothing.
	var nc *notify.Config
	var notifyRoutes []string
	if f.notifyConfig != "" {
		c, err := notify.Load(f.notifyConfig)
		if err != nil {
			return usageError{fmt.Errorf("--%s: %w", notifyConfigFlag, err)}
		}
		nc = &c
	}
	var simCreds *simCredentials
	if !f.sim && f.pve.URL == "" {
		log.Warn().Msg("NO PROXMOX CONFIGURED (--pve-url / CONVERGE_PVE_URL): running the built-in SIMULATOR with demo guests; nothing real is touched")
		f.sim = true
	}
	if f.sim {
		tokenID, secret := "root@pam!converge", randomSecret()
		if f.simToken != "" {
			var ok bool
			if tokenID, secret, ok = strings.Cut(f.simToken, "="); !ok || tokenID == "" || secret == "" {
				return fmt.Errorf("--sim-token %q: want ID=SECRET", f.simToken)
			}
		}
		sim, err := pvesim.New(pvesim.Options{Nodes: f.simNodes, Guests: f.simGuests, DemoTemplates: true,
			Password: randomSecret(), Tokens: map[string]string{tokenID: secret}, Logger: log,
			Faults: pvesim.Faults{ResourcesLag: pvesim.Duration(f.simResourcesLag)}})
		if err != nil {
			return err
		}
		if err := sim.Start(f.simListen); err != nil {
			if errors.Is(err, syscall.EADDRINUSE) {
				return fmt.Errorf("--sim-listen %s: %w (another converge up or converge sim running? stop it, or choose another address)", f.simListen, err)
			}
			return fmt.Errorf("--sim-listen %s: %w", f.simListen, err)
		}
		defer sim.Close()
		log.Info().Str("url", sim.URL()).Str("token_id", tokenID).Str("faults", sim.ControlURL()+"/faults").
			Int("guests", f.simGuests).Msg("Proxmox VE simulator running")
		timeout, calls := f.pve.Timeout, f.pve.NodeCalls
		f.pve = pve.DefaultConfig() // the simulator's, whatever --pve-* say
		f.pve.URL, f.pve.TokenID, f.pve.TokenSecret, f.pve.Timeout, f.pve.NodeCalls = sim.URL(), tokenID, secret, timeout, calls
		f.builtinSim = true // its http on loopback is not warned about
		simCreds = &simCredentials{url: sim.URL(), tokenID: tokenID, secret: secret}
	}
	cfg, err := f.appConfig(g, app.All, log)
	if err != nil {
		return err
	}
	if nc != nil {
		cfg.Notify, notifyRoutes = nc, nc.Names()
	}
	data, err := filepath.Abs(g.data)
	if err != nil {
		return err
	}
	// Desired state posted over HTTP is signed with up's own key, which
	// its planner trusts: in signed mode, the API's callers need no key.
	apiKey, err := loadOrCreateSigningKey(filepath.Join(data, "api-signing.key"))
	if err != nil {
		return fmt.Errorf("--data %s: API signing key: %w", data, err)
	}
	setup, err := f.setup(g, app.All, map[string]ed25519.PublicKey{apiKeyID: apiKey.Public().(ed25519.PublicKey)}, log)
	if err != nil {
		return err
	}
	setup.DefaultTokens = filepath.Join(data, "http-tokens.yaml")
	setup.Sign = func(m *events.Message) error { return events.SignMessage(m, apiKey, apiKeyID, time.Now()) }
	if err := start(cmd.Context(), setup, &cfg); err != nil {
		return err
	}
	external := cmd.Flags().Changed("nats")
	if !external {
		g.natsURL, cfg.Bus.URLs = "", ""
		for _, name := range envNames("nats") {
			if v := os.Getenv(name); v != "" {
				log.Info().Str("ignored", name).Msg("up runs its embedded NATS: " + name + " is for the CLI commands; pass --nats on up's command line to use an external NATS")
				break
			}
		}
		dir, err := filepath.Abs(g.data)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return fmt.Errorf("--data %s: %w", dir, err)
		}
		cfg.Embedded = &natsserver.Options{DataDir: dir, Listen: f.natsListen, ConfigFile: f.natsConfig}
		if f.natsConfig == "" {
			// Nobody gets in without credentials: one user per role,
			// generated on first start; this process connects as admin.
			creds, created, err := natsauth.LoadOrCreate(dir)
			if err != nil {
				return fmt.Errorf("--data %s: NATS credentials: %w", dir, err)
			}
			cfg.Embedded.Users = creds.Users(natsauth.Names{Stream: g.stream, Bucket: g.bucket, Clusters: []string{g.cluster},
				NotifyRoutes: notifyRoutes})
			cfg.Bus.User, cfg.Bus.Password = string(natsauth.Admin), creds[natsauth.Admin]
			log.Info().Str("file", filepath.Join(dir, natsauth.CredentialsFile)).Bool("created", created).
				Msg("embedded NATS requires authentication: one user per role; converge commands run here (or with --data) use the admin credentials")
		}
	}
	if external {
		log.Info().Str("nats", g.natsURL).Msg("NATS: external (--nats)")
	} else {
		log.Info().Str("listen", f.natsListen).Str("data", cfg.Embedded.DataDir).Msg("NATS: embedded JetStream server")
	}
	log.Info().Str("cluster", g.cluster).Msg("converge up: observer, planner and executor starting")
	a, err := app.Start(cmd.Context(), cfg)
	if err != nil {
		if errors.Is(err, cmd.Context().Err()) {
			return nil
		}
		return g.natsAuthHint(err)
	}
	natsURL := g.natsURL
	if !external && f.natsListen != defaultNATSListen {
		natsURL = "nats://" + f.natsListen
	}
	printHint(cmd.OutOrStdout(), simCreds, a.HTTPAddr(), g.data, hintFlags(natsURL, g.data))
	if err := a.Wait(); err != nil && !errors.Is(err, cmd.Context().Err()) {
		return err
	}
	log.Info().Msg("converge up: stopped")
	return nil
}

// simCredentials are the built-in simulator's, printed at start.
type simCredentials struct{ url, tokenID, secret string }

// defaultNATSListen is where up's embedded NATS listens, and so where the
// CLI commands look for it, by default.
const defaultNATSListen = "127.0.0.1:4222"

// hintFlags are the flags the CLI commands in up's hint need to reach it:
// --nats and --data when they are not the defaults ("" or " --nats … --data …").
func hintFlags(natsURL, data string) string {
	var out string
	if natsURL != "" && natsURL != "nats://"+defaultNATSListen {
		out += " --nats " + shellQuote(natsURL)
	}
	if data != "" && data != defaultData {
		if abs, err := filepath.Abs(data); err == nil {
			data = abs
		}
		out += " --data " + shellQuote(data)
	}
	return out
}

// shellQuote quotes s for a shell when it needs it.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"$`\\;&|<>()*?[]#~!{}") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// printHint tells whoever started up what they can do next; flags are
// what the commands need to reach it (hintFlags).
func printHint(w io.Writer, sim *simCredentials, httpAddr, data, flags string) {
	if sim != nil {
		fmt.Fprintf(w, "\nProxmox VE simulator: %s\n  token id:     %s\n  token secret: %s\n", sim.url, sim.tokenID, sim.secret)
		fmt.Fprintf(w, "  curl -H 'Authorization: PVEAPIToken=%s=%s' %s/nodes\n", sim.tokenID, sim.secret, strings.TrimSuffix(sim.url, "/"))
	}
	fmt.Fprintf(w, "\nTry this next, in another shell:\n")
	fmt.Fprintf(w, "  converge desire 101 --power running --cores 2 --memory 2048%s\n  converge wait 101 --timeout 1m%s\n  converge status%s\n", flags, flags, flags)
	if httpAddr != "" {
		fmt.Fprintf(w, "  TOKEN=$(awk '/token:/ {print $NF}' %s)\n  curl -H \"Authorization: Bearer $TOKEN\" http://%s/v1/guests/101\n",
			shellQuote(filepath.Join(data, "http-tokens.yaml")), httpAddr)
	}
	fmt.Fprintln(w)
}
