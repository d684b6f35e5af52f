package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"rsc.io/script"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/clock"
	"github.com/converge-pve/converge/internal/clock/clocktest"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/journal/journaltest"
	"github.com/converge-pve/converge/internal/lease"
	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/scenario"
)

// TestScenarios runs the executor's scripted scenarios (testdata/*.txtar):
// actions delivered from an in-memory journal to Handle, against a
// scripted Proxmox, on a fake clock. No server: each runs in milliseconds.
func TestScenarios(t *testing.T) {
	scenario.Run(t, "testdata/*.txtar", func(t *testing.T) map[string]script.Cmd { return newXHarness(t).cmds() })
}

// autoClock is the fake clock on which a wait moves time forward at once
// (as testing/synctest's bubbles do): a handler that backs off sleeps in
// virtual time, and timers due meanwhile (heartbeats) fire on the way.
type autoClock struct{ *clocktest.Fake }

func (c autoClock) NewTimer(d time.Duration) clock.Timer {
	t := c.Fake.NewTimer(d)
	c.Fake.Advance(d)
	return t
}

// xharness is one scenario's world.
type xharness struct {
	t     *testing.T
	clk   *clocktest.Fake
	j     *journaltest.Journal
	px    *fakePVE
	e     *Executor
	lost  bool
	lastD map[int]uint64 // guest → its newest desired sequence
	lastO map[int]uint64 // guest → its newest observation sequence
	// digest is each guest's config digest as last observed: the digest
	// an action planned from that observation carries.
	digest map[int]string
	n      int
}

var x0 = time.Date(2026, 2, 3, 4, 5, 6, 0, time.UTC)

func newXHarness(t *testing.T) *xharness {
	h := &xharness{t: t, clk: clocktest.New(x0), lastD: map[int]uint64{}, lastO: map[int]uint64{}, digest: map[int]string{}}
	h.j = journaltest.New(DefaultPartitions, h.clk.Now)
	h.px = newFakePVE(h.clk.Now)
	noLeases := func(context.Context, time.Duration, int) (lease.Store, error) {
		return nil, errors.New("no lease store")
	}
	cfg := testConfig("executor@test", zerolog.New(zerolog.NewTestWriter(t)))
	cfg.AckWait, cfg.Clock = 3*time.Second, autoClock{h.clk}
	e, err := New(cfg, h.px, h.j, noLeases)
	if err != nil {
		t.Fatal(err)
	}
	e.owner = h // Handle is driven directly: ownership is the script's
	h.e = e
	return h
}

// Held implements the executor's ownership check.
func (h *xharness) Held(int) bool { return !h.lost }

func (h *xharness) cmds() map[string]script.Cmd {
	return map[string]script.Cmd{
		"guest":     scenario.Cmd("set a guest in the scripted Proxmox", "VMID key=value...", h.guest),
		"desired":   scenario.Cmd("journal a desired event", "VMID JSON", h.desired),
		"observe":   scenario.Cmd("journal an observation of the scripted guest read at now (or read_at=±D), stopped unless status= says otherwise", "VMID [status=S] [pending=KEY:V] [read_at=D] [after=SEQ] [kind=K]", h.observe),
		"action":    scenario.Cmd("journal an action as the planner plans it; prints its sequence", "VMID OP [desired=SEQ] [basis=SEQ] [digest=D] [set.KEY=V] [revert=KEY] [timeout=D] [node=N]", h.action),
		"started":   scenario.Cmd("journal a started result as an executor would", "VMID ACTIONID OP UPID", h.started),
		"rawaction": scenario.Cmd("journal an action body as given", "VMID BODY", h.rawAction),
		"deliver":   scenario.Cmd("hand the N-th delivery of the entry at SEQ to Handle", "SEQ [N]", h.deliver),
		"proxmox":   scenario.Cmd("script the next call of an operation", "fail OP CLASS MESSAGE | task OP EXIT | sync OP | crash OP | observed OP", h.proxmox),
		"lease":     scenario.Cmd("lose or win the action's partition", "lose|win", h.lease),
		"journal":   scenario.Cmd("make appends fail after N more succeed, or heal", "fail-after N | ok", h.journal),
		"advance":   scenario.Cmd("advance the clock", "DURATION", h.advance),
		"results":   scenario.Cmd("print the guest's journalled results", "VMID", h.results),
		"control":   scenario.Cmd("journal an operator's request", "COMMAND all|VMID...", h.control),
		"addresses": scenario.Cmd("journal the guest agent's addresses of a guest, read now (scenario_addresses_test.go)", "VMID", h.addresses),
	}
}

func (h *xharness) publish(kind events.Kind, vmid int, hdr events.Header, body []byte) uint64 {
	return h.j.Publish(events.Message{Subject: events.Subject(kind, "pve", vmid), Header: hdr, Data: body})
}

func (h *xharness) desired(args []string) (string, error) {
	vmid, err := strconv.Atoi(args[0])
	if err != nil {
		return "", err
	}
	seq := h.publish(events.KindDesired, vmid, nil, []byte(strings.Join(args[1:], " ")))
	h.lastD[vmid] = seq
	return fmt.Sprintf("desired %d\n", seq), nil
}

func (h *xharness) started(args []string) (string, error) {
	if len(args) != 4 {
		return "", fmt.Errorf("want VMID ACTIONID OP UPID")
	}
	vmid, err := strconv.Atoi(args[0])
	if err != nil {
		return "", err
	}
	r := events.Result{Meta: events.NewMeta("executor@other", "", h.clk.Now()), ActionID: args[1], VMID: vmid, Cluster: "pve",
		Op: events.Op(args[2]), Status: events.ResultStarted, UPID: args[3], Node: "pve1", Executor: "executor@other"}
	body, _ := json.Marshal(r)
	return fmt.Sprintf("result %d\n", h.publish(events.KindResult, vmid, nil, body)), nil
}

func (h *xharness) rawAction(args []string) (string, error) {
	vmid, err := strconv.Atoi(args[0])
	if err != nil {
		return "", err
	}
	seq := h.publish(events.KindAction, vmid, nil, []byte(strings.Join(args[1:], " ")))
	return fmt.Sprintf("action %d\n", seq), nil
}

// deliver hands a delivery to Handle and prints what followed: the
// mutations Proxmox received, the results journalled, and what became of
// the delivery (ack, term, or left for redelivery).
func (h *xharness) deliver(args []string) (string, error) {
	seq, err := strconv.ParseUint(args[0], 10, 64)
	if err != nil {
		return "", err
	}
	n := uint64(1)
	if len(args) > 1 {
		if n, err = strconv.ParseUint(args[1], 10, 64); err != nil {
			return "", err
		}
	}
	e, _ := h.j.Get(context.Background(), seq)
	if e == nil {
		return "", fmt.Errorf("no entry %d", seq)
	}
	before := len(h.j.Entries())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h.px.cancel = cancel
	d := journaltest.Deliver(*e, n)
	info, _ := events.ParseSubject(e.Subject)
	h.e.Handle(ctx, info.Partition, d)
	var b strings.Builder
	for _, c := range h.px.takeCalls() {
		if r, ok := strings.CutPrefix(c, "read "); ok {
			fmt.Fprintf(&b, "pve-read %s\n", r) // not "proxmox": reads are not mutations
			continue
		}
		fmt.Fprintf(&b, "proxmox %s\n", c)
	}
	for _, en := range h.j.Entries()[before:] {
		b.WriteString(describeResult(en))
	}
	switch acks, terms, _ := d.Counts(); {
	case acks > 0:
		b.WriteString("ack\n")
	case terms > 0:
		b.WriteString("term\n")
	default:
		b.WriteString("left for redelivery\n")
	}
	return b.String(), nil
}

func describeResult(en journal.Entry) string {
	r, err := events.Decode[events.Result](en.Data)
	if err != nil {
		return fmt.Sprintf("entry %d undecodable\n", en.Seq)
	}
	s := fmt.Sprintf("result %d %s", en.Seq, r.Status)
	if r.UPID != "" {
		s += " upid=" + r.UPID
	}
	if r.ErrorClass != "" {
		s += " class=" + string(r.ErrorClass)
	}
	if r.Reason != "" {
		s += " reason=" + strconv.Quote(r.Reason)
	}
	if r.Error != "" {
		s += " error=" + strconv.Quote(r.Error)
	}
	if r.Observed != nil {
		s += " observed=" + r.Observed.Status
		if r.Observed.Pool != "" {
			s += " pool=" + r.Observed.Pool
		}
		if r.Observed.AfterSeq > 0 {
			s += fmt.Sprintf(" derived@%d digest=%q cores=%d", r.Observed.AfterSeq, r.Observed.Digest, r.Observed.Config.Cores)
		}
		if r.Observed.Node != "pve1" {
			s += " on " + r.Observed.Node // read back elsewhere (a migration)
		}
	}
	return s + "\n"
}

func (h *xharness) proxmox(args []string) (string, error) {
	if len(args) < 2 {
		return "", fmt.Errorf("want a verb and an operation")
	}
	op := pve.Op(args[1])
	switch args[0] {
	case "fail":
		if len(args) < 4 {
			return "", fmt.Errorf("want fail OP CLASS MESSAGE")
		}
		h.px.fail[op] = &pve.Error{Class: classOf(args[2]), Status: 500, Message: strings.Join(args[3:], " ")}
	case "task":
		h.px.outcome[op] = strings.Join(args[2:], " ")
	case "sync":
		h.px.sync[op] = true
	case "crash":
		h.px.crash[op] = true
	case "observed":
		// An observer's read of the guest, made while the call runs,
		// journalled before its result.
		h.px.during[op] = func(vmid int) { _, _ = h.observe([]string{strconv.Itoa(vmid), "status=" + h.px.guests[vmid].status}) }
	default:
		return "", fmt.Errorf("unknown verb %q", args[0])
	}
	return "", nil
}

func classOf(name string) pve.Class {
	for c := pve.ClassUnknown; c <= pve.ClassUnauthorized; c++ {
		if c.String() == name {
			return c
		}
	}
	return pve.ClassUnknown
}

func (h *xharness) lease(args []string) (string, error) {
	h.lost = len(args) > 0 && args[0] == "lose"
	return "", nil
}

func (h *xharness) journal(args []string) (string, error) {
	switch {
	case len(args) == 2 && args[0] == "fail-after":
		n, err := strconv.Atoi(args[1])
		h.j.FailAppends(errors.New("nats: timeout"), n)
		return "", err
	case len(args) == 1 && args[0] == "ok":
		h.j.FailAppends(nil, 0)
		return "", nil
	}
	return "", fmt.Errorf("want fail-after N or ok")
}

func (h *xharness) advance(args []string) (string, error) {
	d, err := time.ParseDuration(strings.Join(args, ""))
	h.clk.Advance(d)
	return "", err
}

func (h *xharness) results(args []string) (string, error) {
	vmid, err := strconv.Atoi(args[0])
	if err != nil {
		return "", err
	}
	subject := events.StoredSubject(events.KindResult, "pve", vmid, DefaultPartitions)
	var b strings.Builder
	for _, en := range h.j.Entries() {
		if en.Subject == subject {
			b.WriteString(describeResult(en))
		}
	}
	return b.String(), nil
}

func (h *xharness) control(args []string) (string, error) {
	if len(args) < 2 {
		return "", fmt.Errorf("want COMMAND all|VMID...")
	}
	c := events.Control{Meta: events.NewMeta("alice", "", h.clk.Now()), Command: args[0]}
	for _, a := range args[1:] {
		if a == "all" {
			c.All = true
			continue
		}
		id, err := strconv.Atoi(a)
		if err != nil {
			return "", err
		}
		c.VMIDs = append(c.VMIDs, id)
	}
	body, _ := json.Marshal(c)
	seq := h.j.Publish(events.Message{Subject: events.ClusterSubject(events.KindControl, "pve"), Data: body})
	return fmt.Sprintf("control %d\n", seq), nil
}
