package pvesim

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// task is one Proxmox worker. work runs under s.mu when the task completes
// and returns warnings or the error that fails it; abort undoes what the
// handler did up front (a clone's locked target) if the task never runs.
type task struct {
	upid, node, typ, id, user string
	pid, pstart               int
	start, end                time.Time
	running                   bool
	exit                      string
	log                       []string
	timer                     *time.Timer
	work                      func() ([]string, error)
	abort                     func()
	done                      chan struct{}
}

// TaskInfo is a snapshot of a task for tests and tools.
type TaskInfo struct {
	UPID       string    `json:"upid"`
	Node       string    `json:"node"`
	Type       string    `json:"type"`
	ID         string    `json:"id"`
	User       string    `json:"user"`
	Running    bool      `json:"running"`
	ExitStatus string    `json:"exitstatus,omitempty"`
	Start      time.Time `json:"start"`
	End        time.Time `json:"end,omitzero"`
	Log        []string  `json:"log"`
}

// taskError is a task's failure message, as it appears after "TASK ERROR: ".
type taskError string

func (e taskError) Error() string { return string(e) }

func taskFail(format string, a ...any) error { return taskError(fmt.Sprintf(format, a...)) }

// flockTimeout is the transient error an overloaded Proxmox produces.
func flockTimeout(kind Kind, vmid int) string {
	dir := "qemu-server"
	if kind == LXC {
		dir = "lxc"
	}
	return fmt.Sprintf("can't lock file '/var/lock/%s/lock-%d.conf' - got timeout", dir, vmid)
}

// failMessage is the text of an injected failure. Caller holds s.mu.
func (s *Sim) failMessage(kind Kind, vmid int) string {
	if s.faults.FailMessage != "" {
		return s.faults.FailMessage
	}
	return flockTimeout(kind, vmid)
}

// startTask registers a worker and schedules it. Caller holds s.mu. With an
// injected failure the work is replaced by the flock timeout and abort runs
// at once, so nothing the handler prepared survives.
func (s *Sim) startTask(node, typ string, kind Kind, vmid int, user string, work func() ([]string, error), abort func()) *task {
	return s.startLoggedTask(node, typ, kind, vmid, user, nil, func(func(string)) ([]string, error) { return work() }, abort)
}

// startLoggedTask is startTask for a worker that prints: first are the
// lines it prints as it begins (readable while it runs; absent when an
// injected failure, a flock timeout before the worker's first line,
// replaces the work), and work gets a printer for lines it prints when it
// runs. Caller holds s.mu.
func (s *Sim) startLoggedTask(node, typ string, kind Kind, vmid int, user string, first []string,
	work func(print func(string)) ([]string, error), abort func()) *task {
	return s.startTaskIn(s.faults.TaskLatencyFor(typ), node, typ, kind, vmid, user, first, work, abort)
}

// startTaskIn is startLoggedTask for a task that runs d (0: done before
// its UPID is returned) instead of its type's latency. Caller holds s.mu.
func (s *Sim) startTaskIn(d time.Duration, node, typ string, kind Kind, vmid int, user string, first []string,
	work func(print func(string)) ([]string, error), abort func()) *task {
	now := time.Now()
	s.pidSeq++
	t := &task{
		node: node, typ: typ, id: strconv.Itoa(vmid), user: user,
		pid: s.pidSeq, pstart: int(now.Sub(s.started)/(10*time.Millisecond)) + 1000,
		start: now, running: true, abort: abort,
		done: make(chan struct{}),
	}
	t.work = func() ([]string, error) { return work(func(l string) { t.log = append(t.log, l) }) }
	if vmid == 0 {
		t.id = ""
	}
	t.upid = fmt.Sprintf("UPID:%s:%08X:%08X:%08X:%s:%s:%s:", node, t.pid, t.pstart, now.Unix(), typ, t.id, user)
	if s.roll(s.faults.FailRate) {
		msg := s.failMessage(kind, vmid)
		if abort != nil {
			abort()
		}
		t.abort = nil
		t.work = func() ([]string, error) { return nil, taskError(msg) }
	} else {
		t.log = append(t.log, first...)
	}
	s.tasks = append(s.tasks, t)
	s.taskIdx[t.upid] = t
	s.trimTasks()
	if d > 0 {
		t.timer = time.AfterFunc(d, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.finish(t)
		})
	} else {
		s.finish(t)
	}
	return t
}

// finish runs the task's work and records the outcome. Caller holds s.mu.
func (s *Sim) finish(t *task) {
	if !t.running {
		return
	}
	warnings, err := t.work()
	t.release()
	if err == nil && s.roll(s.faults.WarnRate) {
		warnings = append(warnings, "injected warning (pvesim warn_rate)")
	}
	t.running = false
	t.end = time.Now()
	switch {
	case err != nil:
		t.exit = err.Error()
		t.log = append(t.log, "TASK ERROR: "+err.Error())
	case len(warnings) > 0:
		for _, w := range warnings {
			t.log = append(t.log, "WARN: "+w)
		}
		t.exit = fmt.Sprintf("WARNINGS: %d", len(warnings))
		t.log = append(t.log, "TASK "+t.exit)
	default:
		t.exit = "OK"
		t.log = append(t.log, "TASK OK")
	}
	close(t.done)
}

// stopTask interrupts a running task (DELETE /nodes/{n}/tasks/{upid}).
func (s *Sim) stopTask(t *task) {
	if !t.running {
		return
	}
	if t.timer != nil {
		t.timer.Stop()
	}
	if t.abort != nil {
		t.abort()
	}
	t.release()
	t.running = false
	t.end = time.Now()
	t.exit = "interrupted by signal"
	t.log = append(t.log, "received interrupt", "TASK ERROR: interrupted by signal")
	close(t.done)
}

// trimTasks drops the oldest finished tasks once the log is an eighth over
// MaxTasks, down to MaxTasks: dropping in batches keeps adding a task O(1)
// amortised instead of a scan of the whole log each time.
func (s *Sim) trimTasks() {
	if len(s.tasks) <= s.opts.MaxTasks+s.opts.MaxTasks/8 {
		return
	}
	kept := s.tasks[:0]
	drop := len(s.tasks) - s.opts.MaxTasks
	for _, t := range s.tasks {
		if drop > 0 && !t.running {
			delete(s.taskIdx, t.upid)
			drop--
			continue
		}
		kept = append(kept, t)
	}
	clear(s.tasks[len(kept):]) // the dropped tasks must not stay reachable
	s.tasks = kept
}

// release lets go of what only a running task needs: the work and abort
// closures hold the request's parsed parameters and the guest, which the
// task log (up to MaxTasks entries) would otherwise keep alive.
func (t *task) release() {
	t.work, t.abort, t.timer = nil, nil, nil
}

func (t *task) info() TaskInfo {
	return TaskInfo{UPID: t.upid, Node: t.node, Type: t.typ, ID: t.id, User: t.user, Running: t.running,
		ExitStatus: t.exit, Start: t.start, End: t.end, Log: append([]string(nil), t.log...)}
}

// Tasks returns every task in the log, oldest first.
func (s *Sim) Tasks() []TaskInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]TaskInfo, len(s.tasks))
	for i, t := range s.tasks {
		out[i] = t.info()
	}
	return out
}

// WaitTask blocks until the task ends (or ctx ends) and returns it. Tests use
// it instead of sleeping.
func (s *Sim) WaitTask(ctx context.Context, upid string) (TaskInfo, error) {
	s.mu.Lock()
	t := s.taskIdx[upid]
	s.mu.Unlock()
	if t == nil {
		return TaskInfo{}, fmt.Errorf("pvesim: no task %s", upid)
	}
	select {
	case <-t.done:
	case <-ctx.Done():
		return TaskInfo{}, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return t.info(), nil
}

// ---- HTTP -------------------------------------------------------------------

func (t *task) userAndToken() (string, string) {
	user, tok, _ := strings.Cut(t.user, "!")
	return user, tok
}

func (t *task) statusJSON() map[string]any {
	m := map[string]any{
		"upid": t.upid, "node": t.node, "pid": t.pid, "pstart": t.pstart,
		"starttime": t.start.Unix(), "type": t.typ, "id": t.id,
	}
	user, tok := t.userAndToken()
	m["user"] = user
	if tok != "" {
		m["tokenid"] = tok
	}
	if t.running {
		m["status"] = "running"
	} else {
		m["status"] = "stopped"
		m["exitstatus"] = t.exit
	}
	return m
}

// listJSON is a task log entry: "status" is the end status there.
func (t *task) listJSON() map[string]any {
	m := map[string]any{
		"upid": t.upid, "node": t.node, "pid": t.pid, "pstart": t.pstart,
		"starttime": t.start.Unix(), "type": t.typ, "id": t.id, "user": t.user,
	}
	if !t.running {
		m["endtime"] = t.end.Unix()
		m["status"] = t.exit
	}
	return m
}

func (s *Sim) lookupTask(q *req) (*task, error) {
	upid := q.path("upid")
	t := s.taskIdx[upid]
	if t == nil || t.node != q.path("node") {
		return nil, paramErr1("upid", "no such task")
	}
	return t, nil
}

func (s *Sim) taskStatus(q *req) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.lookupTask(q)
	if err != nil {
		return nil, err
	}
	return t.statusJSON(), nil
}

func (s *Sim) taskLog(q *req) (any, error) {
	start, err := q.intParam("start", 0)
	if err != nil {
		return nil, err
	}
	limit, err := q.intParam("limit", 50)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.lookupTask(q)
	if err != nil {
		return nil, err
	}
	lines := t.log
	if t.running && len(lines) == 0 {
		lines = []string{"no content"}
	}
	out := []map[string]any{}
	for i := start; i < len(lines) && (limit <= 0 || len(out) < limit); i++ {
		out = append(out, map[string]any{"n": i + 1, "t": lines[i]})
	}
	return withTotal{data: out, total: len(lines)}, nil
}

func (s *Sim) taskStop(q *req) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.lookupTask(q)
	if err != nil {
		return nil, err
	}
	s.stopTask(t)
	return nil, nil
}

// taskList serves /cluster/tasks (node == "") and /nodes/{node}/tasks.
// The node list filters like Proxmox: vmid (the UPID's id), typefilter (the
// exact type), since/until (UNIX epoch, inclusive, on the task's start
// second), source (archive: finished tasks, the default; active: running
// ones, listed with status "RUNNING"; all: the active ones first, then the
// archive), then start/limit over what matched. Each part is newest first.
func (s *Sim) taskList(q *req, node string) (any, error) {
	limit, err := q.intParam("limit", 0)
	if err != nil {
		return nil, err
	}
	start, err := q.intParam("start", 0)
	if err != nil {
		return nil, err
	}
	since, err := q.intParam("since", math.MinInt)
	if err != nil {
		return nil, err
	}
	until, err := q.intParam("until", math.MaxInt)
	if err != nil {
		return nil, err
	}
	vmid := q.str("vmid")
	typ := q.str("typefilter")
	source := q.str("source")
	switch source {
	case "", "archive", "active", "all":
	default:
		return nil, paramErr1("source", "value '%s' does not have a value in the enumeration 'archive, active, all'", source)
	}
	running := func(t *task) bool { return t.running }
	finished := func(t *task) bool { return !t.running }
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []map[string]any{}
	skipped := 0
	// add appends the matching tasks that want accepts, newest first, and
	// reports whether the limit is reached.
	add := func(want func(*task) bool) bool {
		for i := len(s.tasks) - 1; i >= 0; i-- {
			t := s.tasks[i]
			st := t.start.Unix()
			if !want(t) || (node != "" && t.node != node) || (vmid != "" && t.id != vmid) ||
				(typ != "" && t.typ != typ) || st < int64(since) || st > int64(until) {
				continue
			}
			if skipped < start {
				skipped++
				continue
			}
			m := t.listJSON()
			if t.running && node != "" {
				m["status"] = "RUNNING" // as Proxmox lists its active tasks
			}
			out = append(out, m)
			if limit > 0 && len(out) >= limit {
				return true
			}
		}
		return false
	}
	switch {
	case node == "": // the cluster log: every task
		add(func(t *task) bool { return source != "active" || t.running })
	case source == "active":
		add(running)
	case source == "all":
		if !add(running) {
			add(finished)
		}
	default:
		add(finished)
	}
	return out, nil
}
