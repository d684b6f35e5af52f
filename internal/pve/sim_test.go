package pve_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/internal/pvesim/pvesimtest"
)

// These tests run the adapter against the simulator over real HTTP: the
// whole path converge uses against a Proxmox cluster.

var (
	startSim  = pvesimtest.Start   // a simulator on a loopback port for the test's lifetime
	newClient = pvesimtest.Client  // a client for it
	tctx      = pvesimtest.Context // a context bound to the test
)

func wantClass(t *testing.T, err error, want pve.Class) {
	t.Helper()
	if err == nil {
		t.Fatalf("want a %v error, got nil", want)
	}
	if got := pve.Classify(err); got != want {
		t.Fatalf("class %v, want %v (err: %v)", got, want, err)
	}
	if !errors.Is(err, want.Sentinel()) {
		t.Fatalf("errors.Is(%v, %v) is false", err, want.Sentinel())
	}
}

func mustWait(t *testing.T, c *pve.Client, tr pve.TaskRef, err error) pve.TaskResult {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.WaitTask(tctx(t), tr, pve.WaitOptions{})
	if err != nil {
		t.Fatalf("task %s: %v", tr.UPID, err)
	}
	return res
}

func TestSimInventoryOneCall(t *testing.T) {
	s := startSim(t, pvesim.Options{Nodes: 3, Guests: 30, DemoTemplates: true})
	if err := s.LockGuest(104, "backup", 0); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, s)
	before := s.Calls()
	inv, err := c.Inventory(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if calls := s.Calls() - before; calls != 1 {
		t.Fatalf("inventory made %d API calls, want 1", calls)
	}
	if len(inv) != 32 {
		t.Fatalf("%d guests", len(inv))
	}
	byID := map[int]pve.Resource{}
	for _, r := range inv {
		byID[r.VMID] = r
	}
	if r := byID[104]; r.Lock != "backup" {
		t.Fatalf("lock lost: %+v", r)
	}
	if !byID[9000].Template || !byID[9001].Template || byID[100].Template {
		t.Fatal("template flags")
	}
	if r := byID[102]; r.Kind != pve.KindLXC || r.Node != "pve3" || r.Status != "running" || len(r.Tags) != 1 || r.Tags[0] != "demo" {
		t.Fatalf("resource 102: %+v", r)
	}
	if r := byID[101]; r.MaxMemMiB != 1024 || r.MaxCPU != 2 || r.Name != "vm-101" {
		t.Fatalf("resource 101: %+v", r)
	}
}

// TestSimRoundTripIsNotDrift writes desired values and reads them back
// through Proxmox's quirks (trimmed descriptions, canonical tags, memory
// typed per version): normalised, they equal what was written.
func TestSimRoundTripIsNotDrift(t *testing.T) {
	for _, ver := range []string{"7", "8", "9"} {
		t.Run("pve"+ver, func(t *testing.T) {
			s := startSim(t, pvesim.Options{Version: ver})
			for _, g := range []pvesim.GuestSpec{{VMID: 100}, {VMID: 101, Kind: pvesim.LXC}} {
				if err := s.AddGuest(g); err != nil {
					t.Fatal(err)
				}
			}
			c := newClient(t, s)
			for _, ref := range []pve.GuestRef{{Kind: pve.KindQEMU, Node: "pve1", VMID: 100}, {Kind: pve.KindLXC, Node: "pve1", VMID: 101}} {
				desc := "line one\nline two  \n"
				tags := []string{"Prod", "web", "db"}
				tr, err := c.UpdateConfig(tctx(t), ref, pve.ConfigChange{Set: map[string]string{
					"description": desc, "tags": "Prod,web;db", "memory": "2048", "cores": "3", "onboot": "1",
				}})
				mustWait(t, c, tr, err)
				gc, err := c.GuestConfig(tctx(t), ref)
				if err != nil {
					t.Fatal(err)
				}
				if gc.Description != events.NormaliseDescription(desc) || events.FormatTags(gc.Tags) != events.FormatTags(tags) ||
					gc.MemoryMiB != 2048 || gc.Cores != 3 || !gc.OnBoot || gc.HasPending() {
					t.Fatalf("%s read back: %+v", ref, gc)
				}
				if gc.Digest == "" {
					t.Fatal("no digest")
				}
			}
		})
	}
}

func TestSimPendingIsNotApplied(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	if err := s.AddGuest(pvesim.GuestSpec{VMID: 100, Cores: 2, Running: true}); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, s)
	ref := pve.GuestRef{Kind: pve.KindQEMU, Node: "pve1", VMID: 100}
	gc, err := c.GuestConfig(tctx(t), ref)
	if err != nil {
		t.Fatal(err)
	}
	// The task finishes within background_delay: no task in the answer.
	tr, err := c.UpdateConfig(tctx(t), ref, pve.ConfigChange{Set: map[string]string{"cores": "4"}, Digest: gc.Digest})
	if err != nil || !tr.IsZero() {
		t.Fatalf("QEMU config POST within background_delay: %+v, %v", tr, err)
	}
	gc2, err := c.GuestConfig(tctx(t), ref)
	if err != nil {
		t.Fatal(err)
	}
	if gc2.Cores != 2 || gc2.Pending["cores"] != "4" || !gc2.HasPending() || gc2.Digest == gc.Digest {
		t.Fatalf("running VM: cores applied=%d pending=%v", gc2.Cores, gc2.Pending)
	}
	// a stale digest is a conflict: re-read and re-plan
	_, err = c.UpdateConfig(tctx(t), ref, pve.ConfigChange{Set: map[string]string{"cores": "8"}, Digest: gc.Digest})
	wantClass(t, err, pve.ClassConflict)
	tr, err = c.Reboot(tctx(t), ref, 0)
	mustWait(t, c, tr, err)
	if gc3, _ := c.GuestConfig(tctx(t), ref); gc3.Cores != 4 || gc3.HasPending() {
		t.Fatalf("after reboot: %+v", gc3)
	}
}

func TestSimPowerAndClasses(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	for _, g := range []pvesim.GuestSpec{{VMID: 100}, {VMID: 101, Kind: pvesim.LXC}} {
		if err := s.AddGuest(g); err != nil {
			t.Fatal(err)
		}
	}
	c := newClient(t, s)
	ctx := tctx(t)
	vm := pve.GuestRef{Kind: pve.KindQEMU, Node: "pve1", VMID: 100}
	ct := pve.GuestRef{Kind: pve.KindLXC, Node: "pve1", VMID: 101}

	for _, ref := range []pve.GuestRef{vm, ct} {
		tr, err := c.Start(ctx, ref)
		mustWait(t, c, tr, err)
		if err := c.VerifyPower(ctx, ref, "running"); err != nil {
			t.Fatal(err)
		}
		st, err := c.GuestStatus(ctx, ref)
		if err != nil || st.Status != "running" {
			t.Fatalf("status %+v %v", st, err)
		}
	}
	// already running: QEMU fails in the task, LXC at once; both already-done
	tr, err := c.Start(ctx, vm)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.WaitTask(ctx, tr, pve.WaitOptions{})
	wantClass(t, err, pve.ClassAlreadyDone)
	_, err = c.Start(ctx, ct)
	wantClass(t, err, pve.ClassAlreadyDone)
	if err := c.VerifyPower(ctx, vm, "stopped"); pve.Classify(err) != pve.ClassTransient {
		t.Fatalf("VerifyPower mismatch: %v", err)
	}

	for _, ref := range []pve.GuestRef{vm, ct} {
		tr, err := c.Shutdown(ctx, ref, 30*time.Second, false)
		mustWait(t, c, tr, err)
	}
	// stopping a stopped guest: QEMU task OK, LXC already-done 500
	tr, err = c.Stop(ctx, vm)
	mustWait(t, c, tr, err)
	_, err = c.Stop(ctx, ct)
	wantClass(t, err, pve.ClassAlreadyDone)
	// reboot of a stopped guest is not "already done"
	_, err = c.Reboot(ctx, vm, time.Minute)
	wantClass(t, err, pve.ClassTerminal)

	// locked: config write refused up front, start fails in the task
	if err := s.LockGuest(100, "backup", 0); err != nil {
		t.Fatal(err)
	}
	_, err = c.UpdateConfig(ctx, vm, pve.ConfigChange{Set: map[string]string{"cores": "2"}})
	wantClass(t, err, pve.ClassLocked)
	tr, err = c.Start(ctx, vm)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.WaitTask(ctx, tr, pve.WaitOptions{})
	wantClass(t, err, pve.ClassLocked)
	_ = s.UnlockGuest(100)

	// gone, terminal
	_, err = c.GuestConfig(ctx, pve.GuestRef{Kind: pve.KindQEMU, Node: "pve1", VMID: 999})
	wantClass(t, err, pve.ClassGone)
	_, err = c.UpdateConfig(ctx, vm, pve.ConfigChange{Set: map[string]string{"cores": "0"}})
	wantClass(t, err, pve.ClassTerminal)

	// clone onto a taken id is a conflict; clone and delete work
	_, err = c.Clone(ctx, vm, pve.CloneSpec{NewID: 101})
	wantClass(t, err, pve.ClassConflict)
	tr, err = c.Clone(ctx, vm, pve.CloneSpec{NewID: 102, Name: "copy"})
	mustWait(t, c, tr, err)
	if g, ok := s.Guest(102); !ok || g.Config["name"] != "copy" {
		t.Fatalf("clone: %+v", g)
	}
	tr, err = c.Delete(ctx, pve.GuestRef{Kind: pve.KindQEMU, Node: "pve1", VMID: 102}, true, false)
	mustWait(t, c, tr, err)
	if _, ok := s.Guest(102); ok {
		t.Fatal("not deleted")
	}
}

func TestSimFaultClasses(t *testing.T) {
	s := startSim(t, pvesim.Options{Guests: 3})
	c := newClient(t, s)
	ctx := tctx(t)
	vm := pve.GuestRef{Kind: pve.KindQEMU, Node: "pve1", VMID: 101}
	ct := pve.GuestRef{Kind: pve.KindLXC, Node: "pve1", VMID: 102}

	// injected flock timeouts are lock waits, in tasks and in sync writes
	_ = s.UpdateFaults(func(f *pvesim.Faults) { f.FailRate = 1 })
	tr, err := c.Start(ctx, vm)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.WaitTask(ctx, tr, pve.WaitOptions{})
	wantClass(t, err, pve.ClassLocked)
	_, err = c.UpdateConfig(ctx, ct, pve.ConfigChange{Set: map[string]string{"cores": "2"}})
	wantClass(t, err, pve.ClassLocked)

	// warnings are success, counted
	_ = s.SetFaults(pvesim.Faults{WarnRate: 1})
	tr, err = c.Start(ctx, vm)
	res := mustWait(t, c, tr, err)
	if !res.OK || res.Warnings != 1 {
		t.Fatalf("warnings: %+v", res)
	}

	// unreachable Proxmox is transient, never "gone"
	s.SetUnreachable(time.Hour)
	_, err = c.Inventory(ctx)
	wantClass(t, err, pve.ClassTransient)
	_, err = c.GuestConfig(ctx, vm)
	wantClass(t, err, pve.ClassTransient)
	s.SetUnreachable(0)
	if _, err := c.Inventory(ctx); err != nil {
		t.Fatal(err)
	}
}

func mustStart(t *testing.T, c *pve.Client, vm pve.GuestRef) pve.TaskRef {
	t.Helper()
	tr, err := c.Start(tctx(t), vm)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestSimWaitTask covers the waiter against real task latency: heartbeats
// while it runs, and a cancelled wait that claims no outcome.
func TestSimWaitTask(t *testing.T) {
	s := startSim(t, pvesim.Options{Guests: 2, Faults: pvesim.Faults{TaskLatency: pvesim.Duration(30 * time.Millisecond)}})
	c := newClient(t, s)
	vm := pve.GuestRef{Kind: pve.KindQEMU, Node: "pve1", VMID: 101}
	tr, err := c.Start(tctx(t), vm)
	if err != nil {
		t.Fatal(err)
	}
	polls := 0
	res, err := c.WaitTask(tctx(t), tr, pve.WaitOptions{Interval: time.Millisecond, OnPoll: func() { polls++ }})
	if err != nil || !res.OK || polls < 1 || res.Polls != polls+1 {
		t.Fatalf("res %+v err %v polls %d", res, err, polls)
	}
	// A task expected to take longer than it does is read once, at the
	// end of the expected time.
	tr, err = c.Stop(tctx(t), vm)
	if err != nil {
		t.Fatal(err)
	}
	if res, err = c.WaitTask(tctx(t), tr, pve.WaitOptions{Interval: time.Millisecond, Expect: 300 * time.Millisecond}); err != nil || !res.OK || res.Polls != 1 {
		t.Fatalf("expected wait: res %+v err %v", res, err)
	}
	if _, err := c.WaitTask(tctx(t), mustStart(t, c, vm), pve.WaitOptions{}); err != nil {
		t.Fatal(err)
	}
	_ = s.UpdateFaults(func(f *pvesim.Faults) { f.TaskLatency = pvesim.Duration(time.Hour) })
	tr, err = c.Stop(tctx(t), vm)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	_, err = c.WaitTask(ctx, tr, pve.WaitOptions{Interval: time.Millisecond, OnPoll: func() {
		if calls++; calls == 3 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
	var pe *pve.Error
	if errors.As(err, &pe) {
		t.Fatalf("a cancelled wait must not claim an outcome: %+v", pe)
	}
}

func TestSimAuthModes(t *testing.T) {
	s := startSim(t, pvesim.Options{TLS: true, Guests: 1})
	ctx := tctx(t)
	// password + pinned fingerprint of the self-signed certificate
	pc := pve.DefaultConfig()
	pc.URL, pc.Username, pc.Password, pc.Fingerprint = s.URL(), "root@pam", pvesimtest.Password, s.Fingerprint()
	c, err := pve.New(pc)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := c.Stop(ctx, pve.GuestRef{Kind: pve.KindQEMU, Node: "pve1", VMID: 100})
	mustWait(t, c, tr, err)
	// a wrong password and a wrong pin are "unauthorized"
	pc2 := pve.DefaultConfig()
	pc2.URL, pc2.Username, pc2.Password, pc2.Fingerprint = s.URL(), "root@pam", "nope", s.Fingerprint()
	bad, _ := pve.New(pc2)
	_, err = bad.Inventory(ctx)
	wantClass(t, err, pve.ClassUnauthorized)
	// Flip the first byte: a constant prefix equals the real pin once in 256 certificates.
	wrongPin := "00" + s.Fingerprint()[2:]
	if wrongPin == s.Fingerprint() {
		wrongPin = "FF" + s.Fingerprint()[2:]
	}
	pc3 := pve.DefaultConfig()
	pc3.URL, pc3.TokenID, pc3.TokenSecret, pc3.Fingerprint = s.URL(), pvesimtest.TokenID, pvesimtest.TokenSecret, wrongPin
	pinned, _ := pve.New(pc3)
	_, err = pinned.Inventory(ctx)
	wantClass(t, err, pve.ClassUnauthorized)
	pc4 := pve.DefaultConfig()
	pc4.URL, pc4.TokenID, pc4.TokenSecret, pc4.Fingerprint = s.URL(), pvesimtest.TokenID, "wrong", s.Fingerprint()
	tok, _ := pve.New(pc4)
	_, err = tok.Inventory(ctx)
	wantClass(t, err, pve.ClassUnauthorized)
}
