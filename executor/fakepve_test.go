package executor

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/converge-pve/converge/internal/pve"
)

// fakePVE is a scripted Proxmox for scenario tests: guests with a power
// state, a lock, a digest and a config; tasks that end as the script says;
// failures and "crashes" (the executor's context ends right after Proxmox
// accepted a call) on demand. Every mutation is logged.
type fakePVE struct {
	mu     sync.Mutex
	now    func() time.Time
	guests map[int]*fakeGuest
	tasks  []*fakeTask
	calls  []string // mutations received, in order
	// reads are the guest reads (status, config) since the last takeCalls.
	reads []string
	// Scripted outcomes of the next call of an operation.
	fail    map[pve.Op]*pve.Error
	outcome map[pve.Op]string // the task's exit status (default OK)
	sync    map[pve.Op]bool   // completes without a task
	crash   map[pve.Op]bool   // the caller dies once Proxmox accepted it
	// during runs once when the operation reaches Proxmox, before it takes
	// effect (an observer's pass reading the guest meanwhile).
	during map[pve.Op]func(vmid int)
	// cancel ends the current handler's context (crash).
	cancel context.CancelFunc
	n      int
}

type fakeGuest struct {
	status, lock, digest string
	node                 string // "" answers on every node
	snaps                []string
	cfg                  pve.GuestConfig
}

type fakeTask struct {
	upid, typ, node string
	vmid            int
	start           time.Time
	exit            string // "" while running
	newid           int    // a clone's target
	done            func() // what the task does when it ends (first waited on)
}

var (
	_ Proxmox     = (*fakePVE)(nil)
	_ TaskFinder  = (*fakePVE)(nil)
	_ CloneFinder = (*fakePVE)(nil)
)

func newFakePVE(now func() time.Time) *fakePVE {
	return &fakePVE{now: now, guests: map[int]*fakeGuest{}, fail: map[pve.Op]*pve.Error{}, outcome: map[pve.Op]string{},
		sync: map[pve.Op]bool{}, crash: map[pve.Op]bool{}, during: map[pve.Op]func(int){}}
}

func (p *fakePVE) guest(ref pve.GuestRef) (*fakeGuest, error) {
	g := p.guests[ref.VMID]
	if g == nil || g.node != "" && ref.Node != g.node {
		msg := fmt.Sprintf("Configuration file 'nodes/%s/qemu-server/%d.conf' does not exist", ref.Node, ref.VMID)
		return nil, &pve.Error{Class: pve.ClassGone, Ref: ref, Status: 500, Message: msg}
	}
	return g, nil
}

var taskTypes = map[pve.Op]string{pve.OpStart: "qmstart", pve.OpStop: "qmstop", pve.OpShutdown: "qmshutdown",
	pve.OpReboot: "qmreboot", pve.OpUpdateConfig: "qmconfig", pve.OpClone: "qmclone", pve.OpDelete: "qmdestroy"}

// mutate records a mutation and answers as scripted: a failure, a
// synchronous completion, or a task; apply takes effect when it succeeds.
func (p *fakePVE) mutate(ctx context.Context, op pve.Op, ref pve.GuestRef, apply func(g *fakeGuest) error) (pve.TaskRef, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, fmt.Sprintf("%s %d", op, ref.VMID))
	if e := p.fail[op]; e != nil {
		delete(p.fail, op)
		e.Op, e.Ref = op, ref
		return pve.TaskRef{}, e
	}
	g, err := p.guest(ref)
	if err != nil {
		return pve.TaskRef{}, err
	}
	if f := p.during[op]; f != nil {
		delete(p.during, op)
		f(ref.VMID)
	}
	exit := p.outcome[op]
	delete(p.outcome, op)
	if exit == "" {
		exit = "OK"
	}
	if exit == "OK" || strings.HasPrefix(exit, "WARNINGS") {
		if err := apply(g); err != nil {
			return pve.TaskRef{}, err
		}
	}
	if p.crash[op] {
		delete(p.crash, op)
		p.cancel() // SIGKILL right after Proxmox accepted the call
	}
	if p.sync[op] {
		delete(p.sync, op)
		return pve.TaskRef{}, nil
	}
	p.n++
	t := &fakeTask{upid: fmt.Sprintf("UPID:%s:%08X:00000001:%08X:%s:%d:root@pam:", ref.Node, p.n, p.now().Unix(), taskTypes[op], ref.VMID),
		typ: taskTypes[op], node: ref.Node, vmid: ref.VMID, start: p.now(), exit: exit}
	p.tasks = append(p.tasks, t)
	return pve.TaskRef{UPID: t.upid, Node: ref.Node}, nil
}

func (p *fakePVE) Start(ctx context.Context, ref pve.GuestRef) (pve.TaskRef, error) {
	return p.mutate(ctx, pve.OpStart, ref, func(g *fakeGuest) error {
		if g.status == "running" {
			return &pve.Error{Class: pve.ClassAlreadyDone, Status: 500, Message: fmt.Sprintf("VM %d already running", ref.VMID)}
		}
		g.status = "running"
		return nil
	})
}

func (p *fakePVE) Stop(ctx context.Context, ref pve.GuestRef) (pve.TaskRef, error) {
	return p.mutate(ctx, pve.OpStop, ref, func(g *fakeGuest) error { g.status = "stopped"; return nil })
}

func (p *fakePVE) Shutdown(ctx context.Context, ref pve.GuestRef, _ time.Duration, _ bool) (pve.TaskRef, error) {
	return p.mutate(ctx, pve.OpShutdown, ref, func(g *fakeGuest) error { g.status = "stopped"; return nil })
}

func (p *fakePVE) Reboot(ctx context.Context, ref pve.GuestRef, _ time.Duration) (pve.TaskRef, error) {
	return p.mutate(ctx, pve.OpReboot, ref, func(*fakeGuest) error { return nil })
}

func (p *fakePVE) UpdateConfig(ctx context.Context, ref pve.GuestRef, ch pve.ConfigChange) (pve.TaskRef, error) {
	return p.mutate(ctx, pve.OpUpdateConfig, ref, func(g *fakeGuest) error {
		if ch.Digest != "" && ch.Digest != g.digest {
			return &pve.Error{Class: pve.ClassConflict, Status: 500, Message: "detected modified configuration - file changed by other user? Try again."}
		}
		for _, k := range ch.Revert {
			p.calls = append(p.calls, "revert "+k) // under p.mu, held by mutate
		}
		for k, v := range ch.Set {
			switch k {
			case "cores":
				g.cfg.Cores, _ = strconv.Atoi(v)
			case "memory":
				g.cfg.MemoryMiB, _ = strconv.Atoi(v)
			case "name":
				g.cfg.Name = v
			case "description":
				g.cfg.Description = v
			}
		}
		g.digest += "+"
		return nil
	})
}

func (p *fakePVE) GuestStatus(_ context.Context, ref pve.GuestRef) (*pve.GuestStatus, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	g, err := p.guest(ref)
	if err != nil {
		return nil, err
	}
	p.reads = append(p.reads, fmt.Sprintf("status %d", ref.VMID))
	return &pve.GuestStatus{Status: g.status, Lock: g.lock}, nil
}

func (p *fakePVE) GuestConfig(_ context.Context, ref pve.GuestRef) (*pve.GuestConfig, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	g, err := p.guest(ref)
	if err != nil {
		return nil, err
	}
	p.reads = append(p.reads, fmt.Sprintf("config %d", ref.VMID))
	c := g.cfg
	c.Ref, c.Digest, c.Lock, c.Tags = ref, g.digest, g.lock, []string{}
	return &c, nil
}

// WaitTask returns the task's scripted exit status at once.
func (p *fakePVE) WaitTask(_ context.Context, t pve.TaskRef, _ pve.WaitOptions) (pve.TaskResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, x := range p.tasks {
		if x.upid != t.UPID {
			continue
		}
		if x.done != nil {
			x.done()
			x.done = nil
		}
		res := pve.TaskResult{UPID: x.upid, ExitStatus: x.exit}
		switch {
		case x.exit == "OK":
			res.OK = true
			return res, nil
		case strings.HasPrefix(x.exit, "WARNINGS: "):
			res.OK = true
			res.Warnings, _ = strconv.Atoi(strings.TrimPrefix(x.exit, "WARNINGS: "))
			res.Log = []string{"WARN: " + x.exit}
			return res, nil
		}
		res.Log = []string{"TASK ERROR: " + x.exit}
		return res, &pve.Error{Class: pve.ClassifyOpMessage(pve.OpUnknown, 0, x.exit), UPID: x.upid, Message: x.exit}
	}
	return pve.TaskResult{}, &pve.Error{Class: pve.ClassGone, Message: "no such task"}
}

// FindTask implements TaskFinder over the tasks the fake started.
func (p *fakePVE) FindTask(_ context.Context, ref pve.GuestRef, op pve.Op, since time.Time) (pve.TaskRef, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.tasks) - 1; i >= 0; i-- {
		x := p.tasks[i]
		if x.vmid == ref.VMID && x.typ == taskTypes[op] && !x.start.Before(since) {
			return pve.TaskRef{UPID: x.upid, Node: x.node}, true, nil
		}
	}
	return pve.TaskRef{}, false, nil
}

// takeCalls returns the mutations received since the last call.
func (p *fakePVE) takeCalls() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.calls
	for _, r := range p.reads {
		c = append(c, "read "+r)
	}
	p.calls, p.reads = nil, nil
	return c
}

// Clone makes the target at once, locked "clone" with the description
// given, as Proxmox does; the lock goes when the task is waited on.
func (p *fakePVE) Clone(ctx context.Context, src pve.GuestRef, spec pve.CloneSpec) (pve.TaskRef, error) {
	var target *fakeGuest
	t, err := p.mutate(ctx, pve.OpClone, src, func(*fakeGuest) error {
		if p.guests[spec.NewID] != nil {
			return &pve.Error{Class: pve.ClassConflict, Status: 500, Message: fmt.Sprintf("unable to create VM %d: config file already exists", spec.NewID)}
		}
		target = &fakeGuest{status: "stopped", lock: "clone", digest: "c0"}
		target.cfg.Description, target.cfg.Name = spec.Description, spec.Name
		p.guests[spec.NewID] = target
		return nil
	})
	if err == nil && !t.IsZero() {
		p.mu.Lock()
		x := p.tasks[len(p.tasks)-1]
		x.newid = spec.NewID
		x.done = func() { target.lock = "" }
		p.mu.Unlock()
	}
	return t, err
}

// Destroy deletes the guest.
func (p *fakePVE) Destroy(ctx context.Context, ref pve.GuestRef) (pve.TaskRef, error) {
	return p.mutate(ctx, pve.OpDelete, ref, func(*fakeGuest) error { delete(p.guests, ref.VMID); return nil })
}

// RemoveHA records the call.
func (p *fakePVE) RemoveHA(_ context.Context, ref pve.GuestRef) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, fmt.Sprintf("remove_ha %d", ref.VMID))
	return nil
}

// FindClone implements CloneFinder over the clones the fake started.
func (p *fakePVE) FindClone(_ context.Context, src pve.GuestRef, newid int, since time.Time) (pve.TaskRef, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.tasks) - 1; i >= 0; i-- {
		x := p.tasks[i]
		if x.typ == "qmclone" && x.vmid == src.VMID && x.newid == newid && !x.start.Before(since) {
			return pve.TaskRef{UPID: x.upid, Node: x.node}, true, nil
		}
	}
	return pve.TaskRef{}, false, nil
}
