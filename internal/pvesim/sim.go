package pvesim

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// DefaultUser is the simulator's superuser, as on a fresh Proxmox install.
const DefaultUser = "root@pam"

// Options configure a simulator. The zero value is usable: one node, no
// guests, no faults, PVE 8 typing, plain HTTP, password auth only.
type Options struct {
	// Nodes is the number of cluster nodes (default 1). Names are pve1..pveN
	// unless NodeNames is set.
	Nodes     int
	NodeNames []string
	// Guests creates that many demo guests (a mix of QEMU VMs and LXC
	// containers, some running) spread over the nodes, plus one QEMU and one
	// LXC template when DemoTemplates is true.
	Guests        int
	DemoTemplates bool
	// Password for root@pam ticket logins. Empty disables ticket login.
	Password string
	// Tokens maps API token ids ("root@pam!converge") to their secrets.
	Tokens map[string]string
	// TLS serves HTTPS with a self-signed certificate (see [Sim.Fingerprint]).
	TLS bool
	// Version selects the PVE release the simulator presents: "9" (the
	// default: PVE 8 reached end of life in August 2026), "8" or "7". "7"
	// types QEMU memory as a number, "8" and "9" as a string; the PVE 9
	// guest behaviours (pve9.go) apply only on "9".
	Version string
	// Seed makes injected failures and generated ids reproducible.
	Seed uint64
	// Faults in force from the start.
	Faults Faults
	// Pools are the resource pools that exist from the start (none by
	// default; see [Sim.AddPool]). A clone may join one with "pool".
	Pools []string
	// HADelay is how long the simulated HA stack takes to act on a
	// requested state or a migrate request (default 100ms; see WaitHA).
	HADelay time.Duration
	// HARebalance, when positive, runs the HA load balancer (PVE 9.2's
	// dynamic CRS with auto rebalancing, hacrs.go) at that interval; 0,
	// the default, runs none. It needs Version 9 (New refuses it
	// otherwise); tests drive rounds with
	// [Sim.RebalanceNow] instead. Guest usage changes every round,
	// reproducibly from Seed.
	HARebalance time.Duration
	// APIWorkers and ProxyWorkers are the pvedaemon and pveproxy workers
	// of every node (apiworkers.go): 0 is Proxmox's default, 3
	// ([DefaultAPIWorkers]); a negative count leaves calls unlimited.
	APIWorkers   int
	ProxyWorkers int
	// HAMaxWorkers is how many HA actions each node's LRM runs at once
	// (halrm.go): 0 is datacenter.cfg's default max_workers, 4
	// ([DefaultHAMaxWorkers]); negative is unlimited.
	HAMaxWorkers int
	// MaxTasks bounds the task log; the oldest finished tasks are dropped
	// first (default 200000).
	MaxTasks int
	// OnMutation, if set, is called (outside the lock) each time a mutating
	// API call is received, before it is validated. The benchmark measures
	// latency up to this point.
	OnMutation func(Mutation)
	Logger     zerolog.Logger
}

// Mutation describes a mutating API call as received.
type Mutation struct {
	Method string
	Path   string
	VMID   int
	At     time.Time
}

// Sim is a running simulator. Create it with [New], serve it with
// [Sim.Start] (or mount [Sim.Handler] yourself) and stop it with [Sim.Close].
type Sim struct {
	opts    Options
	log     zerolog.Logger
	version versionProfile
	served  []string // the registered patterns, "GET /nodes/{node}/qemu"

	mu      sync.Mutex
	nodes   []*node
	guests  map[int]*guest
	tasks   []*task
	taskIdx map[string]*task
	faults  Faults
	// faultSnap is faults, readable without mu (see Faults).
	faultSnap atomic.Pointer[Faults]
	rng       *rand.Rand
	pidSeq    int
	tickets   map[string]ticket
	noACPI    map[int]bool
	// rrd is what the nodes' pvestatd last broadcast, by vmid; statd
	// the daemons (pvestatd.go), nil without a cycle.
	rrd   map[int]rrdEntry
	statd *pvestatd
	// closed: Close ran; nothing starts the daemons again.
	closed bool
	// ha is ha/resources.cfg, by sid ("vm:100").
	ha map[string]*haResource
	// haRules is ha/rules.cfg, by rule id; haGroups ha/groups.cfg, by
	// name (harules.go, hagroups.go).
	haRules  map[string]*haRule
	haGroups map[string]*haGroup
	// haMoves are the migrations the HA stack started; haMoving the
	// guests it is moving; placeQueued: a placement round is queued
	// (haplace.go).
	haMoves     []HAMove
	haMoving    map[int]bool
	placeQueued bool
	// pools are the resource pools of user.cfg, by id; vmPool is its vms
	// map (guest to pool, also for guests that do not exist).
	pools  map[string]*poolDef
	vmPool map[int]string
	// cloneSlots counts the running full clones per target storage
	// (Faults.StorageCloneLimit).
	cloneSlots map[string]int
	// storeFree is when each storage lock is free next (storagelock.go).
	storeFree map[string]time.Time
	// crm is the HA stack's queued work (hacrm.go); lrm the nodes' LRM
	// workers (halrm.go).
	crm *haCRM
	lrm map[string]*haLRM
	// crs is the HA load balancer's state (hacrs.go).
	crs haCRS
	// templates are the downloaded appliance templates ("local:vztmpl/…").
	templates map[string]bool
	// isos are the downloaded ISO images ("local:iso/…", volumes.go).
	isos map[string]bool
	// freedVols are volumes freed while a config names them (volumes.go).
	freedVols map[string]*guest

	calls     atomic.Int64
	mutations atomic.Int64

	// daemons are every node's API worker pools, by node name and in
	// node order (apiworkers.go), fixed at New.
	daemons    map[string]*nodeDaemons
	daemonList []*nodeDaemons

	handler  http.Handler
	srv      *http.Server
	ln       net.Listener
	url      string
	tlsCert  *tls.Certificate
	fingerpr string
	started  time.Time
}

// New builds a simulator in memory. Nothing listens until [Sim.Start].
func New(opts Options) (*Sim, error) {
	if opts.Nodes <= 0 {
		opts.Nodes = 1
	}
	if len(opts.NodeNames) == 0 {
		for i := 1; i <= opts.Nodes; i++ {
			opts.NodeNames = append(opts.NodeNames, fmt.Sprintf("pve%d", i))
		}
	}
	opts.Nodes = len(opts.NodeNames)
	if opts.Guests < 0 {
		return nil, errors.New("pvesim: Options.Guests must be >= 0")
	}
	if opts.MaxTasks <= 0 {
		opts.MaxTasks = 200000
	}
	vp, err := profileFor(opts.Version)
	if err != nil {
		return nil, err
	}
	if opts.HARebalance < 0 || opts.HARebalance > 0 && vp.release < "9" {
		return nil, fmt.Errorf("pvesim: Options.HARebalance %v: the HA load balancer needs Version 9 and an interval >= 0", opts.HARebalance)
	}
	if err := opts.Faults.validate(); err != nil {
		return nil, err
	}
	for id := range opts.Tokens {
		if !strings.Contains(id, "!") || !strings.Contains(id, "@") {
			return nil, fmt.Errorf("pvesim: token id %q must look like user@realm!name", id)
		}
	}
	s := &Sim{
		opts:    opts,
		log:     opts.Logger,
		version: vp,
		guests:  make(map[int]*guest),
		taskIdx: make(map[string]*task),
		faults:  opts.Faults,
		rng:     rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15)),
		pidSeq:  1000,
		tickets: make(map[string]ticket),
		noACPI:  make(map[int]bool),
		rrd:     make(map[int]rrdEntry),
		started: time.Now(),

		ha:         make(map[string]*haResource),
		haRules:    make(map[string]*haRule),
		haGroups:   make(map[string]*haGroup),
		haMoving:   make(map[int]bool),
		pools:      make(map[string]*poolDef),
		vmPool:     make(map[int]string),
		cloneSlots: make(map[string]int),
	}
	for _, p := range opts.Pools {
		if !poolIDRe.MatchString(p) {
			return nil, fmt.Errorf("pvesim: pool name %q contains invalid characters", p)
		}
		s.pools[p] = newPool()
	}
	for i, name := range opts.NodeNames {
		s.nodes = append(s.nodes, &node{name: name, id: i + 1, ip: fmt.Sprintf("192.0.2.%d", 10+i)})
	}
	s.publishFaults()
	s.seedDemo()
	s.initAPIWorkers()
	s.handler = s.routes()
	s.mu.Lock()
	s.syncPvestatd() // after the seed: the first broadcast knows the demo guests
	s.mu.Unlock()
	s.startRebalance()
	return s, nil
}

// Start listens on addr ("127.0.0.1:0" picks a free port) and serves until
// Close.
func (s *Sim) Start(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		// net's error says what and where ("listen tcp ADDR: bind: address
		// already in use"); the command that gave addr names its flag.
		return err
	}
	s.srv = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		// pveproxy speaks HTTP/1.1 only; go-proxmox misreads h2 errors.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
		ErrorLog:     nil,
	}
	scheme := "http"
	if s.opts.TLS {
		cert, fp, err := selfSignedCert()
		if err != nil {
			_ = ln.Close()
			return err
		}
		s.tlsCert, s.fingerpr = cert, fp
		ln = tls.NewListener(ln, &tls.Config{
			Certificates: []tls.Certificate{*cert},
			NextProtos:   []string{"http/1.1"},
			MinVersion:   tls.VersionTLS12,
		})
		scheme = "https"
	}
	s.ln = ln
	s.url = fmt.Sprintf("%s://%s/api2/json", scheme, ln.Addr().String())
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error().Err(err).Msg("pvesim: serve")
		}
	}()
	return nil
}

// Close stops serving, the pvestatd daemons and pending task timers.
func (s *Sim) Close() error {
	s.closePvestatd()
	s.stopRebalance()
	s.mu.Lock()
	for _, t := range s.tasks {
		if t.timer != nil {
			t.timer.Stop()
		}
	}
	s.mu.Unlock()
	if s.srv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if err != nil {
		err = s.srv.Close()
	}
	return err
}

// URL is the API base URL including /api2/json, as go-proxmox wants it.
func (s *Sim) URL() string { return s.url }

// ControlURL is the base of the fault-injection control API (/_sim).
func (s *Sim) ControlURL() string { return strings.TrimSuffix(s.url, "/api2/json") + "/_sim" }

// Fingerprint is the SHA-256 fingerprint of the TLS certificate, in PVE's
// colon-separated upper-case hex, or "" without TLS.
func (s *Sim) Fingerprint() string { return s.fingerpr }

// Certificate is the self-signed TLS certificate, or nil without TLS.
func (s *Sim) Certificate() *tls.Certificate { return s.tlsCert }

// Handler serves the API and the control path; useful with httptest.
func (s *Sim) Handler() http.Handler { return s.handler }

// NodeNames lists the cluster's nodes in order.
func (s *Sim) NodeNames() []string { return append([]string(nil), s.opts.NodeNames...) }

// Calls is the number of /api2/json requests received so far.
func (s *Sim) Calls() int64 { return s.calls.Load() }

// Mutations is the number of mutating /api2/json requests received so far.
func (s *Sim) Mutations() int64 { return s.mutations.Load() }

func (s *Sim) nodeByName(name string) *node {
	for _, n := range s.nodes {
		if n.name == name {
			return n
		}
	}
	return nil
}

type node struct {
	name string
	id   int
	ip   string
}

type ticket struct {
	user    string
	csrf    string
	expires time.Time
}
