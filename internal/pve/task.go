package pve

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// UPID is a parsed task id:
// UPID:<node>:<pid>:<pstart>:<starttime>:<type>:<id>:<user>: (hex numbers,
// trailing colon).
type UPID struct {
	Node      string
	PID       uint64
	PStart    uint64
	StartTime time.Time
	Type      string // qmstart, vzshutdown, qmclone, hastart, …
	ID        string // usually the vmid (the source vmid for clones)
	User      string // user@realm or user@realm!tokenid
}

// ParseUPID parses a UPID. The trailing colon is optional here.
func ParseUPID(s string) (UPID, error) {
	parts := strings.Split(s, ":")
	if len(parts) < 8 || parts[0] != "UPID" || parts[1] == "" {
		return UPID{}, fmt.Errorf("%q is not a UPID", s)
	}
	if len(parts) > 9 || (len(parts) == 9 && parts[8] != "") {
		return UPID{}, fmt.Errorf("%q is not a UPID (extra fields)", s)
	}
	if !nodeNameRE.MatchString(parts[1]) {
		return UPID{}, fmt.Errorf("UPID %q: bad node name", s)
	}
	var nums [3]uint64
	for i := range nums {
		n, err := strconv.ParseUint(parts[2+i], 16, 64)
		if err != nil {
			return UPID{}, fmt.Errorf("UPID %q: field %d is not hex", s, 2+i)
		}
		nums[i] = n
	}
	return UPID{
		Node:      parts[1],
		PID:       nums[0],
		PStart:    nums[1],
		StartTime: time.Unix(int64(nums[2]), 0).UTC(),
		Type:      parts[5],
		ID:        parts[6],
		User:      parts[7],
	}, nil
}

// Op returns the operation a task of this type performs, for classifying
// its exit status.
func (u UPID) Op() Op {
	t := u.Type
	switch {
	case strings.HasPrefix(t, "qm"):
		t = t[2:]
	case strings.HasPrefix(t, "vz"):
		t = t[2:]
	case strings.HasPrefix(t, "ha"):
		t = t[2:]
	}
	switch t {
	case "start":
		return OpStart
	case "stop":
		return OpStop
	case "shutdown":
		return OpShutdown
	case "reboot":
		return OpReboot
	case "config":
		return OpUpdateConfig
	case "clone":
		return OpClone
	case "destroy":
		return OpDelete
	}
	if op, ok := opsTaskTypes[t]; ok {
		return op
	}
	return OpUnknown
}

// Ref returns the guest the task is about, as far as the UPID tells (Kind is
// empty for HA tasks).
func (u UPID) Ref() GuestRef {
	ref := GuestRef{Node: u.Node}
	if id, err := strconv.Atoi(u.ID); err == nil {
		ref.VMID = id
	}
	switch {
	case strings.HasPrefix(u.Type, "qm"):
		ref.Kind = KindQEMU
	case strings.HasPrefix(u.Type, "vz"):
		ref.Kind = KindLXC
	}
	return ref
}

// WaitOptions tune WaitTask. Zero values take the defaults.
type WaitOptions struct {
	// Interval is the first pause between status polls (default 20ms): most
	// tasks end quickly, so start small...
	Interval time.Duration
	// MaxInterval caps the doubling pause (default 1s) ...and stop
	// hammering pveproxy for long ones (clones, backups).
	MaxInterval time.Duration
	// OnPoll, if set, is called after each poll that found the task still
	// running: hook NATS InProgress heartbeats here.
	OnPoll func()
	// LogLines is how many trailing task log lines are kept when a task
	// fails or warns (default 50).
	LogLines int
	// MaxPollErrors is how many consecutive transient poll failures are
	// tolerated before giving up (default 5). The task keeps running on
	// Proxmox either way.
	MaxPollErrors int
	// Expect is how long the task is expected to run (0: unknown). The
	// first poll waits that long, and polling then starts again at
	// Interval: a task of a known length is found finished in about one
	// poll, within a few Intervals of its end, where doubling from the
	// start took up to twice its length and several polls.
	Expect time.Duration
	// Fine, if set, caps the pause at FineInterval for the wait's first
	// Fine: a task whose length nothing told yet is found soon after its
	// end if it is short, and a long one is polled at pauses doubling
	// from FineInterval to MaxInterval after.
	Fine, FineInterval time.Duration
}

func (o WaitOptions) withDefaults() WaitOptions {
	if o.Interval <= 0 {
		o.Interval = 20 * time.Millisecond
	}
	if o.MaxInterval <= 0 {
		o.MaxInterval = time.Second
	}
	if o.MaxInterval < o.Interval {
		o.MaxInterval = o.Interval
	}
	if o.LogLines <= 0 {
		o.LogLines = 50
	}
	if o.MaxPollErrors <= 0 {
		o.MaxPollErrors = 5
	}
	return o
}

// TaskResult is how a task ended.
type TaskResult struct {
	UPID       string
	ExitStatus string // "OK", "WARNINGS: n" or the error text; "" if synchronous
	OK         bool   // OK or WARNINGS
	Warnings   int
	Log        []string // trailing log lines, filled on failure or warnings
	// Polls is how many status reads it took (0 for a zero TaskRef).
	Polls int
}

// taskLogFetch is how many log lines are fetched to keep the tail: the error
// is at the end, and the API pages from the start.
const taskLogFetch = 1000

// WaitTask polls a task until it ends. A zero TaskRef succeeds at once.
//
// Success is exit status "OK" or "WARNINGS: n" (go-proxmox's Task.Wait gets
// both wrong). A failed task returns its TaskResult (with log) and an *Error
// classified from the exit status for the task's operation, e.g. "VM 100
// already running" on a start task is ClassAlreadyDone.
//
// If ctx ends first, WaitTask returns an error wrapping ctx.Err() and claims
// no outcome: the task continues on Proxmox; wait again with the same
// TaskRef.
func (c *Client) WaitTask(ctx context.Context, t TaskRef, opts WaitOptions) (TaskResult, error) {
	res := TaskResult{UPID: t.UPID}
	if t.IsZero() {
		res.OK = true
		return res, nil
	}
	u, err := ParseUPID(t.UPID)
	if err != nil {
		return res, &Error{Class: ClassTerminal, Op: OpTaskStatus, Message: err.Error(), Err: err, UPID: t.UPID}
	}
	node := t.Node
	if node == "" {
		node = u.Node
	}
	if !nodeNameRE.MatchString(node) {
		err := fmt.Errorf("task node %q is not a valid PVE node name", node)
		return res, &Error{Class: ClassTerminal, Op: OpTaskStatus, Message: err.Error(), Err: err, UPID: t.UPID}
	}
	opts = opts.withDefaults()
	defer c.wire.slots.waitingOn(node)()
	// The raw UPID goes into the path: PVE expects its colons, '@' and '!'
	// unescaped.
	path := "/nodes/" + node + "/tasks/" + t.UPID
	interval := opts.Interval
	pollErrs := 0
	began := c.now()
	if opts.Expect > 0 {
		if err := Sleep(ctx, opts.Expect); err != nil {
			return res, fmt.Errorf("pve: waiting for task %s: %w", t.UPID, err)
		}
	}
	for {
		res.Polls++
		st, err := c.taskStatus(ctx, path, u)
		switch {
		case err != nil && ctx.Err() != nil:
			return res, fmt.Errorf("pve: waiting for task %s: %w", t.UPID, ctx.Err())
		case err != nil:
			pollErrs++
			if Classify(err) != ClassTransient || pollErrs > opts.MaxPollErrors {
				return res, err
			}
			c.log.Debug().Str("upid", t.UPID).Err(err).Msg("pve task poll failed; retrying")
		case st.Status != "stopped":
			pollErrs = 0
			if opts.OnPoll != nil {
				opts.OnPoll()
			}
		default:
			return c.taskEnded(ctx, path, u, res, st.ExitStatus, opts)
		}
		var pause time.Duration
		pause, interval = opts.pause(interval, c.now().Sub(began))
		if err := Sleep(ctx, pause); err != nil {
			return res, fmt.Errorf("pve: waiting for task %s: %w", t.UPID, err)
		}
	}
}

// pause is the pause before the next poll of a wait elapsed long whose
// pauses double from interval, and the interval after it. Within Fine the
// pause is at most FineInterval and the doubling stops there, so that
// polling past Fine doubles on from FineInterval: a task a little longer
// than Fine is found a FineInterval or two late, not up to MaxInterval.
func (o WaitOptions) pause(interval, elapsed time.Duration) (pause, next time.Duration) {
	next = min(interval*2, o.MaxInterval)
	if o.Fine > 0 && elapsed < o.Fine {
		fine := max(o.FineInterval, o.Interval)
		return min(interval, fine), min(next, fine)
	}
	return interval, next
}

// logLine is an entry of GET …/tasks/{upid}/log: its number, its text.
type logLine struct {
	N int    `json:"n"`
	T string `json:"t"`
}

type taskStatus struct {
	UPID       string `json:"upid"`
	Node       string `json:"node"`
	Status     string `json:"status"`
	ExitStatus string `json:"exitstatus"`
}

// taskStatus reads the status into a fresh value each time: the answer's
// upid/node are not trusted to address later polls.
func (c *Client) taskStatus(ctx context.Context, path string, u UPID) (taskStatus, error) {
	st, err := call[*taskStatus](ctx, c, OpTaskStatus, u.Ref(), http.MethodGet, path+"/status", nil)
	if err != nil {
		return taskStatus{}, err
	}
	if st == nil {
		return taskStatus{}, &Error{Class: ClassUnknown, Op: OpTaskStatus, Ref: u.Ref(), Message: "task status answer carried no data"}
	}
	return *st, nil
}

func (c *Client) taskEnded(ctx context.Context, path string, u UPID, res TaskResult, exit string, opts WaitOptions) (TaskResult, error) {
	res.ExitStatus = exit
	if exit == "OK" {
		res.OK = true
		return res, nil
	}
	if n, ok := parseWarnings(exit); ok {
		res.OK, res.Warnings = true, n
		res.Log = c.taskLog(ctx, path, u, opts.LogLines)
		return res, nil
	}
	res.Log = c.taskLog(ctx, path, u, opts.LogLines)
	op := u.Op()
	e := &Error{
		Class:   ClassifyOpMessage(op, 0, exit),
		Op:      op,
		Ref:     u.Ref(),
		Message: exit,
		UPID:    res.UPID,
	}
	c.log.Debug().Str("upid", res.UPID).Str("exitstatus", exit).Stringer("class", e.Class).Msg("pve task failed")
	return res, e
}

// parseWarnings reads "WARNINGS: n".
func parseWarnings(exit string) (int, bool) {
	rest, ok := strings.CutPrefix(exit, "WARNINGS:")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(rest))
	if err != nil {
		return 0, true // still a success; the count is cosmetic
	}
	return n, true
}

// taskLog returns the last n lines of a task's log; failures to read it are
// logged and yield nil, as the exit status already tells the outcome.
func (c *Client) taskLog(ctx context.Context, path string, u UPID, n int) []string {
	q := fmt.Sprintf("%s/log?start=0&limit=%d", path, taskLogFetch)
	lines, err := call[[]logLine](ctx, c, OpTaskLog, u.Ref(), http.MethodGet, q, nil)
	if err != nil || lines == nil {
		c.log.Debug().Err(err).Msg("pve task log unavailable")
		return nil
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].N < lines[j].N })
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = l.T
	}
	return out
}

// Sleep waits d; if ctx ends first, it returns ctx.Err() at once.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// VerifyPower re-reads a guest's status after a successful start/stop task
// and returns a ClassTransient *Error if it is not (yet) in want ("running"
// or "stopped"). HA-managed guests report their task OK long before the
// guest changes state; retry VerifyPower with backoff.
func (c *Client) VerifyPower(ctx context.Context, ref GuestRef, want string) error {
	if want != "running" && want != "stopped" {
		err := fmt.Errorf("wanted power state %q must be running or stopped", want)
		return &Error{Class: ClassTerminal, Op: OpVerifyPower, Ref: ref, Message: err.Error(), Err: err}
	}
	st, err := c.GuestStatus(ctx, ref)
	if err != nil {
		return err
	}
	if st.Status != want {
		return &Error{
			Class:   ClassTransient,
			Op:      OpVerifyPower,
			Ref:     ref,
			Message: fmt.Sprintf("guest is %s, want %s", st.Status, want),
		}
	}
	return nil
}
