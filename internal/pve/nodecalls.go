package pve

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"
)

// DefaultNodeCalls is Config.NodeCalls' default: a Proxmox node serves
// API calls with 3 pvedaemon workers (writes and task starts) and 3
// pveproxy workers (reads) by default (pve-manager PVE/Service/pvedaemon.pm
// and pveproxy.pm, max_workers), and has no request rate limiter: a call
// beyond the free workers waits in the node's listen queue. More than 3 of
// one client's reads, or 3 of its writes, in flight to a node therefore
// only lengthen that queue, for the client and for everyone else.
const DefaultNodeCalls = 3

// nodeSlots bounds a client's requests in flight per node and per kind of
// worker: pvedaemon's (writes, and the protected reads: daemonRead) and
// pveproxy's (the other reads) take slots of their own, so that a config
// read never waits behind a node's queued config writes, as it does not
// on Proxmox. A request under /nodes/{node}/ takes one of that node's
// slots; the cluster-wide paths (served by the entry node) have slots of
// their own.
//
// Waiters are served in three lines: first the short calls (reads such as
// a task's status poll, and task starts: POST …/status/…), which hold a
// worker only for the call and on which a task's start or end waits; then
// the writes a task waits on (Ahead: a config write before its guest's
// reboot); then the other writes. The sooner a long task is under way and
// its end seen, the sooner the change is done.
//
// And while this process waits on tasks running on a node (WaitTask), the
// long calls (the writes: a config write holds its worker for qmconfig's
// whole work, 0.2 s and more) hold at most n-1 of its slots: one is kept
// for the short calls, the tasks' polls and the next task's start, which
// would otherwise wait behind three config writes in turn. With no task
// to wait on, the writes may take every slot: a fleet change's first
// writes are what its first tasks wait for. (Terraform harness, 3 nodes:
// keeping the slot always cost the 20-VM change 0.12 s of its first
// writes and saved the 100-VM change 0.2 s of its waves.) And when a
// write a task waits on (Ahead) ends with no task running, its slot is
// held from the next writes for the short calls that follow it (its
// task's start, a status read), until a task starts on the node (any:
// holds are counted, not matched) or for holdFor: they would otherwise
// find every slot taken by the next writes, and wait 0.2 s and more for
// one. The next Ahead writes may still take all but one of the held
// slots (longOK). A hold no task start ends costs the writes a slot for
// holdFor: a write whose next task is not a POST …/status/… (a
// migration, a resize), one refused or re-sent, or, with other executor
// processes running this node's tasks, one whose task waits for the
// planner's slot. (Terraform harness: a fleet change's first reboots went out 0.3 to
// 0.7 s after it, behind the next round of writes; now the first at
// 0.27 s. Three nodes, 20 VMs, one wave: 1.68 s against 1.72 s, three
// runs of each in turn; one node, 100 VMs, 13 waves: within the runs'
// spread, 14.7 to 15.2 s. Keeping a slot from an Ahead write's start
// instead cost the 20-VM change 0.14 s, and holding the slots from the
// next Ahead writes too 0.04 s.)
type nodeSlots struct {
	n     int
	now   func() time.Time
	after func(time.Duration, func()) // runs a func after a while: time.AfterFunc
	mu    sync.Mutex
	by    map[slotKey]*slotPool
}

type slotKey struct {
	node   string
	daemon bool // pvedaemon's calls, else pveproxy's
}

// daemonRead reports whether a GET of path is one Proxmox serves in
// pvedaemon ("protected": 1 in its API schema): a guest's current status
// (QEMU asks QMP), a task's status and log, and the guest agent. Other
// reads are served by pveproxy itself. (qemu-server PVE/API2/Qemu.pm,
// pve-container src/PVE/API2/LXC.pm, pve-manager PVE/API2/Tasks.pm.)
func daemonRead(path string) bool {
	for _, p := range []string{"/status/current", "/tasks/", "/agent/", "/snapshot", "/migrate", "/feature"} {
		if strings.Contains(path, p) {
			return true
		}
	}
	// The guest lists (GET /nodes/{node}/qemu, …/lxc).
	return strings.HasSuffix(path, "/qemu") || strings.HasSuffix(path, "/lxc")
}

// slotPool is n slots with FIFO lines of waiters, served in order: task
// starts and reads, then the writes a task waits on, then the rest; but a
// waiter of a later line that has waited agingBound goes before them all
// (oldest first), so that a steady stream of polls never starves a write.
type slotPool struct {
	free  int
	long  int         // slots held by long calls (lineAhead, lineRest)
	cap   int         // the most long calls at once while tasks run: n-1, or n when n is 1
	tasks int         // tasks on the node this process waits on (pvedaemon's pool)
	held  []time.Time // until when each ended Ahead write holds a slot for its task's start
	lines [3][]waiter
}

// holdFor is how long an ended Ahead write's slot is held for the short
// calls that follow it, unless its task starts first: its read-back, its
// result, the next action's planning and delivery (some 40 ms in the
// Terraform harness, more on a loaded machine). A write whose task does
// not come (the planner decided otherwise) costs the node's writes a slot
// for this long, no more.
const holdFor = 250 * time.Millisecond

// longOK reports whether a long call of line may take a free slot at
// now. The holds keep their slots from the writes nothing waits on; a
// write a task waits on leaves one of them, for the task starts, and may
// take the rest: in a change of one wave its own task is as near as the
// ones held for.
func (p *slotPool) longOK(line int, now time.Time) bool {
	keep := p.holding(now)
	if line == lineAhead {
		keep = min(keep, 1)
	}
	return p.free > keep && (p.tasks == 0 || p.long < p.cap)
}

// holding is how many slots are held for task starts at now (dropping
// the holds past their time).
func (p *slotPool) holding(now time.Time) int {
	for len(p.held) > 0 && !now.Before(p.held[0]) {
		p.held = p.held[1:]
	}
	return len(p.held)
}

// granted records a slot handed to a call of line (start: a task's start,
// which ends the oldest hold).
func (p *slotPool) granted(line int, start bool) {
	p.free--
	switch {
	case line != lineStart:
		p.long++
	case start && len(p.held) > 0:
		p.held = p.held[1:]
	}
}

type waiter struct {
	ch    chan struct{}
	since time.Time
	start bool // a task's start
}

// agingBound is how long a waiter of a later line waits at most before
// it is served ahead of the first line. Longer than a node's line of
// writes in a fleet change (100 guests' config writes on one node drain
// in about 7 s), so that their reboots still go first (at 1 s, the Terraform
// harness on one node went from 16.3 to 22.8 s); short enough that a
// stream of polls cannot hold a write for long.
const agingBound = 10 * time.Second

// The lines of a slotPool.
const (
	lineStart = iota
	lineAhead
	lineRest
)

func newNodeSlots(n int) *nodeSlots {
	if n <= 0 {
		return nil
	}
	return &nodeSlots{n: n, now: time.Now, by: map[slotKey]*slotPool{},
		after: func(d time.Duration, f func()) { time.AfterFunc(d, f) }}
}

// acquire waits for a slot for a request (method, path), or for ctx;
// release gives it back.
func (s *nodeSlots) acquire(ctx context.Context, method, path string) (release func(), err error) {
	if s == nil {
		return func() {}, nil
	}
	write := method != http.MethodGet && method != http.MethodHead
	daemon := write || daemonRead(path)
	key := slotKey{nodeOfPath(path), daemon}
	line := lineRest
	start := write && method == http.MethodPost && strings.Contains(path, "/status/")
	switch {
	case !write || start:
		line = lineStart // short: a read, or a task start
	case ahead(ctx):
		line = lineAhead
	}
	s.mu.Lock()
	p := s.pool(key)
	long := line != lineStart
	release = func() { s.release(p, long, line == lineAhead) }
	now := s.now()
	if p.free > 0 && p.waiting(line) == 0 && (!long || p.longOK(line, now)) {
		p.granted(line, start)
		s.mu.Unlock()
		return release, nil
	}
	ch := make(chan struct{})
	p.lines[line] = append(p.lines[line], waiter{ch, now, start})
	s.mu.Unlock()
	select {
	case <-ch:
		return release, nil
	case <-ctx.Done():
		s.mu.Lock()
		gone := drop(&p.lines[line], ch)
		s.mu.Unlock()
		if !gone { // granted meanwhile: hand it on
			s.release(p, long, false)
		}
		return nil, ctx.Err()
	}
}

// waiting is how many wait in line or in the lines served before it.
func (p *slotPool) waiting(line int) int {
	n := 0
	for l := range line + 1 {
		n += len(p.lines[l])
	}
	return n
}

// pool is key's pool, made on first use; s.mu is held.
func (s *nodeSlots) pool(key slotKey) *slotPool {
	p := s.by[key]
	if p == nil {
		p = &slotPool{free: s.n, cap: max(s.n-1, 1)}
		s.by[key] = p
	}
	return p
}

// waitingOn counts a task on node this process waits on; the returned
// func ends it.
func (s *nodeSlots) waitingOn(node string) (done func()) {
	if s == nil {
		return func() {}
	}
	s.mu.Lock()
	p := s.pool(slotKey{node, true})
	p.tasks++
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		p.tasks--
		s.grant(p) // the writes may take the kept slot again
	}
}

// release gives a slot back; an Ahead write's is held for its task's
// start (holdFor), and the writes waiting get another look when the hold
// lapses.
func (s *nodeSlots) release(p *slotPool, long, aheadWrite bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p.free++
	if long {
		p.long--
	}
	if aheadWrite && p.tasks == 0 {
		// (While a task runs, the long calls' cap keeps a slot already;
		// a write ended then may lead to a task that waits for a task
		// slot of the planner's, a wave away: its hold would only keep
		// the next writes waiting.)
		p.held = append(p.held, s.now().Add(holdFor))
		s.after(holdFor, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.grant(p)
		})
	}
	s.grant(p)
}

// grant hands free slots to waiters; s.mu is held.
func (s *nodeSlots) grant(p *slotPool) {
	for p.free > 0 {
		now := s.now()
		next := p.next(now)
		if next < 0 {
			return
		}
		w := p.lines[next][0]
		p.lines[next] = p.lines[next][1:]
		p.granted(next, w.start)
		close(w.ch)
	}
}

// next is the line whose head a free slot goes to, or -1: a later line's
// head that has waited agingBound first (the oldest), then the lines in
// order; a long line only if longOK.
func (p *slotPool) next(now time.Time) int {
	next := -1
	for l := lineStart + 1; l < len(p.lines); l++ {
		if line := p.lines[l]; len(line) > 0 && now.Sub(line[0].since) >= agingBound && p.longOK(l, now) &&
			(next < 0 || line[0].since.Before(p.lines[next][0].since)) {
			next = l
		}
	}
	for l := 0; next < 0 && l < len(p.lines); l++ {
		if len(p.lines[l]) > 0 && (l == lineStart || p.longOK(l, now)) {
			next = l
		}
	}
	return next
}

// drop removes ch from line, reporting whether it was there.
func drop(line *[]waiter, ch chan struct{}) bool {
	for i, w := range *line {
		if w.ch == ch {
			*line = append((*line)[:i], (*line)[i+1:]...)
			return true
		}
	}
	return false
}

type gateKey struct{}

// ErrGateClosed is the error of a mutation not sent because its context's
// gate (WithGate) closed while it waited for a slot.
var ErrGateClosed = errors.New("not sent: the caller's gate closed while the call waited for a slot of its node")

// WithGate makes ctx's mutations ask open once their node's slot is
// granted, right before they are sent, and not be sent (ErrGateClosed)
// if it says no: an executor's lease, checked before the call, may have
// lapsed while it waited.
func WithGate(ctx context.Context, open func() bool) context.Context {
	return context.WithValue(ctx, gateKey{}, open)
}

func gateOf(ctx context.Context) func() bool { g, _ := ctx.Value(gateKey{}).(func() bool); return g }

type aheadKey struct{}

// Ahead marks ctx's writes as ones a task waits on (a config write before
// the guest's reboot): they wait in the node's first line, with the task
// starts, so that the task is under way sooner.
func Ahead(ctx context.Context) context.Context { return context.WithValue(ctx, aheadKey{}, true) }

func ahead(ctx context.Context) bool { b, _ := ctx.Value(aheadKey{}).(bool); return b }

// nodeOfPath is the node a request path addresses (…/nodes/{node}/…), or
// "" for the cluster-wide paths.
func nodeOfPath(path string) string {
	const seg = "/nodes/"
	i := strings.Index(path, seg)
	if i < 0 {
		return ""
	}
	rest := path[i+len(seg):]
	if j := strings.IndexByte(rest, '/'); j >= 0 {
		rest = rest[:j]
	}
	return rest
}
