package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/spf13/cobra"

	"github.com/converge-pve/converge/internal/pvesim"
)

type simFlags struct {
	listen       string
	nodes        int
	guests       int
	templates    bool
	latency      time.Duration
	taskLatency  time.Duration
	typeLatency  []string
	failRate     float64
	failMessage  string
	warnRate     float64
	resourcesLag time.Duration
	password     string
	tokens       []string
	tls          bool
	pveVersion   string
	seed         uint64
	mutationLog  string
	haRebalance  string
	apiWorkers   int
	proxyWorkers int
	haWorkers    int
	storeHold    time.Duration
	storeTimeout time.Duration
}

func newSimCmd(g *globals) *cobra.Command {
	f := &simFlags{}
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Run the standalone Proxmox VE API simulator",
		Long: `Runs a stateful Proxmox VE API simulator that go-proxmox and other Proxmox
clients drive unchanged. It prints its URL and credentials (user root@pam) and
runs until interrupted. Faults can be changed while it runs under /_sim/
(see docs/simulator.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runSim(cmd, g, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.listen, "listen", "127.0.0.1:8006", "address to listen on (host:port)")
	fl.IntVar(&f.nodes, "nodes", 1, "number of cluster nodes")
	fl.IntVar(&f.guests, "guests", 0, "number of demo guests to create")
	fl.BoolVar(&f.templates, "templates", true, "also create a QEMU and an LXC template (9000, 9001) when --guests > 0")
	fl.DurationVar(&f.latency, "latency", 0, "latency added to every API call")
	fl.DurationVar(&f.taskLatency, "task-latency", 0, "how long every Proxmox task runs")
	fl.StringArrayVar(&f.typeLatency, "task-latency-type", nil, "how long tasks of one type run, as TYPE=DURATION, e.g. qmstart=1s (repeatable; overrides --task-latency for that type)")
	fl.Float64Var(&f.failRate, "fail-rate", 0, "probability (0..1) that a mutating call fails transiently")
	fl.StringVar(&f.failMessage, "fail-message", "", "the text of those failures (default: the flock timeout, which clients wait out as a lock)")
	fl.Float64Var(&f.warnRate, "warn-rate", 0, "probability (0..1) that a task ends with warnings")
	fl.DurationVar(&f.resourcesLag, "resources-lag", pvesim.DefaultPvestatdCycle, "pvestatd's cycle: each node broadcasts its guests' status, name, maxcpu and maxmem to /cluster/resources this often, on its own phase (0: live)")
	fl.StringVar(&f.password, "password", "", "root@pam password (default: generated and printed)")
	fl.StringArrayVar(&f.tokens, "token", nil, "API token as ID=SECRET, e.g. root@pam!converge=s3cret (repeatable; default: one generated)")
	fl.BoolVar(&f.tls, "tls", false, "serve HTTPS with a self-signed certificate (fingerprint printed)")
	fl.StringVar(&f.pveVersion, "pve-version", "9", "Proxmox VE version to present: 7, 8 or 9")
	fl.Uint64Var(&f.seed, "seed", 1, "seed for injected failures and generated ids")
	fl.StringVar(&f.haRebalance, "ha-rebalance", "off", "run the HA load balancer (PVE 9.2's CRS auto rebalancing; needs --pve-version 9) at this interval, e.g. 10s (0 or off: none)")
	fl.IntVar(&f.apiWorkers, "api-workers", pvesim.DefaultAPIWorkers, "pvedaemon workers per node, serving the API's protected calls (Proxmox: 3; 0: unlimited)")
	fl.IntVar(&f.proxyWorkers, "proxy-workers", pvesim.DefaultAPIWorkers, "pveproxy workers per node, serving the other calls (Proxmox: 3; 0: unlimited)")
	fl.IntVar(&f.haWorkers, "ha-max-workers", pvesim.DefaultHAMaxWorkers, "HA actions each node's LRM runs at once (datacenter.cfg max_workers, Proxmox: 4; 0: unlimited)")
	fl.DurationVar(&f.storeHold, "storage-lock-hold", 0, "how long each volume operation (allocation, linked clone, base conversion, free) holds its storage's lock (0: the lock is not modelled)")
	fl.DurationVar(&f.storeTimeout, "storage-lock-timeout", pvesim.DefaultStorageLockTimeout, "how long a task waits for a storage's lock before it fails (Proxmox: 10s)")
	fl.StringVar(&f.mutationLog, "mutation-log", "", "write every mutating API call, as received, as a JSON line to this file (- = standard output, after the address)")
	return cmd
}

// parseRebalance reads --ha-rebalance: a duration, or 0 or off for none.
func parseRebalance(v string) (time.Duration, error) {
	if v == "off" || v == "0" || v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("--ha-rebalance %q: want an interval such as 10s, or off", v)
	}
	return d, nil
}

// workersOption maps a worker-count flag (0: unlimited) to its
// pvesim.Options field (negative: unlimited; 0 would be Proxmox's default).
func workersOption(n int) int {
	if n <= 0 {
		return -1
	}
	return n
}

func randomSecret() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func runSim(cmd *cobra.Command, g *globals, f *simFlags) error {
	log, err := g.logger()
	if err != nil {
		return err
	}
	if f.password == "" {
		f.password = randomSecret()
	}
	tokens := map[string]string{}
	for _, t := range f.tokens {
		id, secret, ok := strings.Cut(t, "=")
		if !ok || id == "" || secret == "" {
			return usageError{fmt.Errorf("--token %q: want ID=SECRET, e.g. root@pam!converge=s3cret", t)}
		}
		tokens[id] = secret
	}
	if len(tokens) == 0 {
		tokens["root@pam!converge"] = randomSecret()
	}
	byType, err := pvesim.ParseTaskLatencies(f.typeLatency)
	if err != nil {
		return usageError{fmt.Errorf("--task-latency-type %w", err)}
	}
	rebalance, err := parseRebalance(f.haRebalance)
	if err != nil {
		return usageError{err}
	}
	ml, err := openMutationLog(f.mutationLog, cmd.OutOrStdout())
	if err != nil {
		return err
	}
	defer ml.close()
	sim, err := pvesim.New(pvesim.Options{
		Nodes: f.nodes, Guests: f.guests, DemoTemplates: f.templates && f.guests > 0,
		Password: f.password, Tokens: tokens, TLS: f.tls, Version: f.pveVersion, Seed: f.seed,
		Logger: log, OnMutation: ml.write, HARebalance: rebalance,
		APIWorkers: workersOption(f.apiWorkers), ProxyWorkers: workersOption(f.proxyWorkers), HAMaxWorkers: workersOption(f.haWorkers),
		Faults: pvesim.Faults{
			StorageLockHold: pvesim.Duration(f.storeHold), StorageLockTimeout: pvesim.Duration(f.storeTimeout),
			Latency: pvesim.Duration(f.latency), TaskLatency: pvesim.Duration(f.taskLatency), TaskLatencyByType: byType,
			FailRate: f.failRate, FailMessage: f.failMessage, WarnRate: f.warnRate, ResourcesLag: pvesim.Duration(f.resourcesLag),
		},
	})
	if err != nil {
		return err
	}
	if err := sim.Start(f.listen); err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("--listen %s: %w (another converge sim or converge up running? stop it, or choose another address)", f.listen, err)
		}
		return fmt.Errorf("--listen %s: %w", f.listen, err)
	}
	defer sim.Close()

	info := map[string]any{
		"url": sim.URL(), "control_url": sim.ControlURL(), "user": pvesim.DefaultUser, "password": f.password,
		"tokens": tokens, "nodes": sim.NodeNames(), "guests": len(sim.Guests()),
	}
	if fp := sim.Fingerprint(); fp != "" {
		info["fingerprint"] = fp
	}
	out := cmd.OutOrStdout()
	if g.output == "json" {
		if err := json.NewEncoder(out).Encode(info); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(out, "Proxmox VE simulator listening\n")
		fmt.Fprintf(out, "  URL:          %s\n", sim.URL())
		fmt.Fprintf(out, "  user:         %s\n  password:     %s\n", pvesim.DefaultUser, f.password)
		for id, secret := range tokens {
			fmt.Fprintf(out, "  API token:    %s=%s\n", id, secret)
		}
		if fp := sim.Fingerprint(); fp != "" {
			fmt.Fprintf(out, "  fingerprint:  %s\n", fp)
		}
		fmt.Fprintf(out, "  nodes:        %s\n  guests:       %d\n", strings.Join(sim.NodeNames(), ", "), len(sim.Guests()))
		fmt.Fprintf(out, "  faults:       %s/faults (GET, PATCH)\n", sim.ControlURL())
		fmt.Fprintf(out, "Try: curl -s -H 'Authorization: PVEAPIToken=%s' %s/cluster/resources?type=vm\n", firstToken(tokens), sim.URL())
	}
	if fl, ok := out.(*os.File); ok {
		_ = fl.Sync()
	}
	ml.open()
	log.Info().Str("url", sim.URL()).Msg("simulator running; interrupt to stop")
	<-cmd.Context().Done()
	log.Info().Msg("simulator stopping")
	return nil
}

// mutationLog writes one JSON line per mutating call. It is held closed
// until the address is printed, so that on standard output the address
// comes first; calls meanwhile wait rather than go unlogged.
type mutationLog struct {
	mu   sync.Mutex
	w    io.Writer
	file *os.File // nil for standard output
	buf  []byte
}

type mutationLine struct {
	At       time.Time `json:"at"`
	AtUnixNs int64     `json:"at_unix_ns"`
	Method   string    `json:"method"`
	Path     string    `json:"path"`
	VMID     int       `json:"vmid,omitempty"`
}

// openMutationLog returns nil for no log; a nil log's methods do nothing.
func openMutationLog(path string, stdout io.Writer) (*mutationLog, error) {
	ml := &mutationLog{w: stdout}
	switch path {
	case "":
		return nil, nil
	case "-":
	default:
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("--mutation-log: %w", err)
		}
		ml.w, ml.file = f, f
	}
	ml.mu.Lock()
	return ml, nil
}

func (ml *mutationLog) open() {
	if ml != nil {
		ml.mu.Unlock()
	}
}

func (ml *mutationLog) write(m pvesim.Mutation) {
	if ml == nil {
		return
	}
	ml.mu.Lock()
	defer ml.mu.Unlock()
	b, _ := json.Marshal(mutationLine{At: m.At.UTC(), AtUnixNs: m.At.UnixNano(), Method: m.Method, Path: m.Path, VMID: m.VMID})
	// One write per line: a reader never sees half of one.
	ml.buf = append(append(ml.buf[:0], b...), '\n')
	_, _ = ml.w.Write(ml.buf)
}

func (ml *mutationLog) close() {
	if ml != nil && ml.file != nil {
		_ = ml.file.Close()
	}
}

func firstToken(tokens map[string]string) string {
	for id, s := range tokens {
		return id + "=" + s
	}
	return ""
}
