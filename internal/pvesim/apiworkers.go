package pvesim

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// ---- API workers (pveproxy, pvedaemon) --------------------------------------
//
// Every request enters a node's pveproxy. PVE::HTTPServer::rest_handler
// (pve-manager) answers a call for another node by proxying it there
// ($info->{proxyto}: PVE::APIServer::AnyEvent::proxy_request, an
// asynchronous request that holds no worker) and hands a handler marked
// "protected" to the local pvedaemon (proxy => 'localhost'); every other
// handler runs inside pveproxy's worker. Both daemons are PVE::Daemon
// pools of max_workers processes (3: PVE::Service::pveproxy and
// PVE::Service::pvedaemon %daemon_options, MAX_WORKERS in
// /etc/default/pveproxy overrides it) accepting from one listen socket;
// a worker runs the handler to its end, so a request waits in the
// socket's backlog until a worker is free. Nothing refuses or
// rate-limits it. A task-starting handler returns once fork_worker has
// forked the task, so the task holds no worker.
//
// The simulator gives each node one pool per daemon: a buffered channel
// used as a semaphore, whose blocked senders Go serves in arrival order.
// A call under /nodes/{node}/ holds a worker of that node, any other
// call one of the first node's (the one the client talks to), for the
// added latency and the handler's own time (inline work such as the
// synchronous qmconfig included). A 401's delay is a timer in pveproxy's
// event loop (AnyEvent.pm handle_api2_request): its worker is let go
// first.

// DefaultAPIWorkers is Proxmox's max_workers for pveproxy and pvedaemon.
const DefaultAPIWorkers = 3

// apiPool is one daemon's workers on one node.
type apiPool struct {
	sem     chan struct{} // nil: unlimited
	size    int
	calls   atomic.Int64
	waited  atomic.Int64 // calls that found every worker busy
	queued  atomic.Int64 // calls waiting now
	waitNs  atomic.Int64 // their total wait
	maxWait atomic.Int64 // the longest wait, in ns
}

func newAPIPool(n int) *apiPool {
	p := &apiPool{size: n}
	if n > 0 {
		p.sem = make(chan struct{}, n)
	}
	return p
}

// acquire takes a worker, waiting in arrival order; false if ctx ends
// first.
func (p *apiPool) acquire(ctx context.Context) bool {
	p.calls.Add(1)
	if p.sem == nil {
		return true
	}
	select {
	case p.sem <- struct{}{}:
		return true
	default:
	}
	p.queued.Add(1)
	start := time.Now()
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		p.queued.Add(-1)
		return false
	}
	p.queued.Add(-1)
	w := int64(time.Since(start))
	p.waited.Add(1)
	p.waitNs.Add(w)
	for {
		m := p.maxWait.Load()
		if w <= m || p.maxWait.CompareAndSwap(m, w) {
			break
		}
	}
	return true
}

func (p *apiPool) release() {
	if p.sem != nil {
		<-p.sem
	}
}

// nodeDaemons are a node's two pools.
type nodeDaemons struct {
	name          string
	daemon, proxy *apiPool
}

// workerHold is a request's worker, let go once.
type workerHold struct {
	pool *apiPool
	held bool
}

func (h *workerHold) release() {
	if h != nil && h.held {
		h.held = false
		h.pool.release()
	}
}

type holdKey struct{}

// releaseWorker lets the request's worker go early (before a 401's delay).
func releaseWorker(r *http.Request) {
	if h, ok := r.Context().Value(holdKey{}).(*workerHold); ok {
		h.release()
	}
}

// workerCount reads an Options worker count: 0 is Proxmox's default,
// negative unlimited.
func workerCount(n int) int {
	switch {
	case n == 0:
		return DefaultAPIWorkers
	case n < 0:
		return 0
	}
	return n
}

// initAPIWorkers builds every node's pools. Nodes are fixed at New.
func (s *Sim) initAPIWorkers() {
	s.daemons = make(map[string]*nodeDaemons, len(s.nodes))
	for _, n := range s.nodes {
		d := &nodeDaemons{name: n.name, daemon: newAPIPool(workerCount(s.opts.APIWorkers)), proxy: newAPIPool(workerCount(s.opts.ProxyWorkers))}
		s.daemons[n.name] = d
		s.daemonList = append(s.daemonList, d)
	}
}

// opTrie matches request paths against the schema's path templates, one
// segment a level; a {param} segment matches any one segment, a last one
// also the rest of the path (volume ids hold slashes).
type opTrie struct {
	lit     map[string]*opTrie
	wild    *opTrie
	methods map[string]bool // the protected methods of the path ending here
}

func (t *opTrie) add(method, path string) {
	n := t
	for _, seg := range strings.Split(strings.Trim(path, "/"), "/") {
		if strings.HasPrefix(seg, "{") {
			if n.wild == nil {
				n.wild = &opTrie{}
			}
			n = n.wild
			continue
		}
		if n.lit == nil {
			n.lit = map[string]*opTrie{}
		}
		c := n.lit[seg]
		if c == nil {
			c = &opTrie{}
			n.lit[seg] = c
		}
		n = c
	}
	if n.methods == nil {
		n.methods = map[string]bool{}
	}
	n.methods[method] = true
}

// match reports whether method on path (its segments from rest) is a
// protected operation; a literal segment is tried before a parameter.
func (t *opTrie) match(method, rest string) bool {
	if rest == "" {
		return t.methods[method]
	}
	seg, tail, _ := strings.Cut(rest, "/")
	if c := t.lit[seg]; c != nil && c.match(method, tail) {
		return true
	}
	if w := t.wild; w != nil {
		if w.match(method, tail) {
			return true
		}
		if w.lit == nil && w.wild == nil && w.methods[method] {
			return true // a last {volume} taking the rest
		}
	}
	return false
}

// protectedTrie holds protectedOps.
var protectedTrie = func() *opTrie {
	t := &opTrie{}
	for _, op := range protectedOps {
		method, path, _ := strings.Cut(op, " ")
		t.add(method, path)
	}
	return t
}()

// isProtected reports whether the schema marks the call to path (under
// /api2/json) protected.
func isProtected(method, path string) bool {
	rest := strings.Trim(strings.TrimPrefix(path, "/api2/json"), "/")
	return protectedTrie.match(method, rest)
}

// poolFor is the pool a call takes a worker from; pattern is the
// registered one it matched ("": none, answered 501 by pveproxy).
func (s *Sim) poolFor(method, path, pattern string) *apiPool {
	d := s.daemonList[0]
	if rest, ok := strings.CutPrefix(path, "/api2/json/nodes/"); ok {
		name, _, _ := strings.Cut(rest, "/")
		if nd := s.daemons[name]; nd != nil {
			d = nd
		}
	}
	if pattern != "" && isProtected(method, path) {
		return d.daemon
	}
	return d.proxy
}

// PoolStats are one daemon's workers on one node, as GET /_sim/stats
// reports them under "api_workers".
type PoolStats struct {
	// Workers is the pool's size (0: unlimited).
	Workers int `json:"workers"`
	// Busy and Queued are the calls holding and waiting for a worker now.
	Busy   int   `json:"busy"`
	Queued int64 `json:"queued"`
	// Calls counts every call the pool served; Waited those that found
	// every worker busy, TotalWait and MaxWait how long they waited.
	Calls     int64    `json:"calls"`
	Waited    int64    `json:"waited"`
	TotalWait Duration `json:"total_wait"`
	MaxWait   Duration `json:"max_wait"`
}

// NodeWorkerStats are a node's pvedaemon and pveproxy pools.
type NodeWorkerStats struct {
	Node      string    `json:"node"`
	PVEDaemon PoolStats `json:"pvedaemon"`
	PVEProxy  PoolStats `json:"pveproxy"`
}

func (p *apiPool) stats() PoolStats {
	return PoolStats{Workers: p.size, Busy: len(p.sem), Queued: p.queued.Load(), Calls: p.calls.Load(),
		Waited: p.waited.Load(), TotalWait: Duration(p.waitNs.Load()), MaxWait: Duration(p.maxWait.Load())}
}

// APIWorkerStats reports every node's API worker pools, in node order.
func (s *Sim) APIWorkerStats() []NodeWorkerStats {
	out := make([]NodeWorkerStats, len(s.daemonList))
	for i, d := range s.daemonList {
		out[i] = NodeWorkerStats{Node: d.name, PVEDaemon: d.daemon.stats(), PVEProxy: d.proxy.stats()}
	}
	return out
}
