package pvesim_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	proxmox "github.com/luthermonson/go-proxmox"

	"github.com/converge-pve/converge/internal/pvesim"
)

// Each fault kind is observable through go-proxmox.

func TestFaultLatency(t *testing.T) {
	s := startSim(t, pvesim.Options{Faults: pvesim.Faults{Latency: pvesim.Duration(time.Hour)}})
	c := tokenClient(s)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	// The call cannot complete before its deadline: the simulator holds it.
	if _, err := c.Version(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("with 1h latency: %v", err)
	}
	if err := s.SetFaults(pvesim.Faults{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Version(ctxT(t)); err != nil {
		t.Fatalf("after clearing latency: %v", err)
	}
}

func TestFaultTaskLatencyAndTaskStop(t *testing.T) {
	s := startSim(t, pvesim.Options{Faults: pvesim.Faults{TaskLatency: pvesim.Duration(time.Hour)}})
	if err := s.AddGuest(pvesim.GuestSpec{VMID: 100, Name: "slow"}); err != nil {
		t.Fatal(err)
	}
	c := tokenClient(s)
	ctx := ctxT(t)
	n, _ := c.Node(ctx, "pve1")
	vm, _ := n.VirtualMachine(ctx, 100)
	task, err := vm.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if !task.IsRunning || task.IsCompleted {
		t.Fatalf("task should still run: %+v", task)
	}
	if g, _ := s.Guest(100); g.Status != "stopped" {
		t.Fatal("a running start task must not have started the guest yet")
	}
	// A clone's target exists at once, locked, while the task runs.
	_, ctask, err := vm.Clone(ctx, &proxmox.VirtualMachineCloneOptions{NewID: 101})
	if err != nil {
		t.Fatal(err)
	}
	if g, ok := s.Guest(101); !ok || g.Lock != "clone" {
		t.Fatalf("clone target during the task: %+v", g)
	}
	var res []map[string]any
	if err := c.Get(ctx, "/cluster/resources?type=vm", &res); err != nil {
		t.Fatal(err)
	}
	if res[1]["lock"] != "clone" {
		t.Fatalf("resources show the clone lock live: %v", res[1])
	}
	// Stopping the task interrupts it; nothing it would have done happens.
	if err := task.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ctask.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	task = waitTask(t, s, task)
	if !task.IsFailed || task.ExitStatus != "interrupted by signal" {
		t.Fatalf("stopped task: %q", task.ExitStatus)
	}
	if g, _ := s.Guest(100); g.Status != "stopped" {
		t.Fatal("interrupted start changed the guest")
	}
	if _, ok := s.Guest(101); ok {
		t.Fatal("interrupted clone left its target behind")
	}
	// Shorter latency: the task completes on its own.
	if err := s.UpdateFaults(func(f *pvesim.Faults) { f.TaskLatency = pvesim.Duration(time.Millisecond) }); err != nil {
		t.Fatal(err)
	}
	task, err = vm.Start(ctx)
	mustOK(t, s, task, err)
	if g, _ := s.Guest(100); g.Status != "running" {
		t.Fatal("start did not take effect")
	}
}

func TestFaultFailRate(t *testing.T) {
	s := startSim(t, pvesim.Options{Guests: 3, Faults: pvesim.Faults{FailRate: 1}})
	c := tokenClient(s)
	ctx := ctxT(t)
	n, _ := c.Node(ctx, "pve1")
	vm, _ := n.VirtualMachine(ctx, 101)
	task, err := vm.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	task = waitTask(t, s, task)
	if !task.IsFailed || task.ExitStatus != "can't lock file '/var/lock/qemu-server/lock-101.conf' - got timeout" {
		t.Fatalf("injected failure: %q", task.ExitStatus)
	}
	if g, _ := s.Guest(101); g.Status != "stopped" {
		t.Fatal("failed task took effect")
	}
	ct, _ := n.Container(ctx, 102)
	_, err = ct.Config(ctx, proxmox.ContainerOption{Name: "cores", Value: 2})
	errContains(t, err, "500 can't lock file '/var/lock/lxc/lock-102.conf' - got timeout")
	// A failed clone leaves no half-made target.
	_, task, err = vm.Clone(ctx, &proxmox.VirtualMachineCloneOptions{NewID: 150})
	if err != nil {
		t.Fatal(err)
	}
	if task = waitTask(t, s, task); !task.IsFailed {
		t.Fatal("clone should fail")
	}
	if _, ok := s.Guest(150); ok {
		t.Fatal("failed clone left a target")
	}
}

// An injected failure with a message of its own: a task ends with it, a
// synchronous call answers 500 with it in the status line.
func TestFaultFailMessage(t *testing.T) {
	const msg = "start failed: QEMU exited with code 1"
	s := startSim(t, pvesim.Options{Guests: 3, Faults: pvesim.Faults{FailRate: 1, FailMessage: msg}})
	c := tokenClient(s)
	ctx := ctxT(t)
	n, _ := c.Node(ctx, "pve1")
	vm, _ := n.VirtualMachine(ctx, 101)
	task, err := vm.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if task = waitTask(t, s, task); !task.IsFailed || task.ExitStatus != msg {
		t.Fatalf("injected failure: %q", task.ExitStatus)
	}
	ct, _ := n.Container(ctx, 102)
	_, err = ct.Config(ctx, proxmox.ContainerOption{Name: "cores", Value: 2})
	errContains(t, err, "500 "+msg)
}

func TestFaultWarnings(t *testing.T) {
	s := startSim(t, pvesim.Options{Guests: 2, Faults: pvesim.Faults{WarnRate: 1}})
	c := tokenClient(s)
	ctx := ctxT(t)
	n, _ := c.Node(ctx, "pve1")
	vm, _ := n.VirtualMachine(ctx, 101)
	task, err := vm.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	task = waitTask(t, s, task)
	// go-proxmox counts "WARNINGS: n" as failed: the trap converge's own
	// waiter avoids. The guest did start.
	if task.ExitStatus != "WARNINGS: 1" || !task.IsFailed {
		t.Fatalf("warning task: %q failed=%v", task.ExitStatus, task.IsFailed)
	}
	if g, _ := s.Guest(101); g.Status != "running" {
		t.Fatal("a task with warnings still takes effect")
	}
	log, err := task.Log(ctx, 0, 10)
	if err != nil || log[len(log)-1] != "TASK WARNINGS: 1" {
		t.Fatalf("log %v %v", log, err)
	}
}

func TestFaultLock(t *testing.T) {
	s := startSim(t, pvesim.Options{Guests: 3})
	c := tokenClient(s)
	ctx := ctxT(t)
	n, _ := c.Node(ctx, "pve1")
	before, _ := s.Guest(101)
	if err := s.LockGuest(101, "backup", 0); err != nil {
		t.Fatal(err)
	}
	if g, _ := s.Guest(101); g.Digest == before.Digest {
		t.Fatal("setting a lock changes the digest")
	}
	vm, _ := n.VirtualMachine(ctx, 101)
	_, err := vm.Config(ctx, proxmox.VirtualMachineOption{Name: "cores", Value: 2})
	errContains(t, err, "500 VM is locked (backup)")
	task, err := vm.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if task = waitTask(t, s, task); task.ExitStatus != "VM is locked (backup)" {
		t.Fatalf("start of a locked VM: %q", task.ExitStatus)
	}
	st := rawData(t, c, "/nodes/pve1/qemu/101/status/current").(map[string]any)
	if st["lock"] != "backup" {
		t.Fatalf("status/current lock: %v", st["lock"])
	}
	if err := s.LockGuest(102, "snapshot", 0); err != nil {
		t.Fatal(err)
	}
	ct, _ := n.Container(ctx, 102)
	_, err = ct.Config(ctx, proxmox.ContainerOption{Name: "cores", Value: 2})
	errContains(t, err, "500 CT is locked (snapshot)")
	if err := s.UnlockGuest(101); err != nil {
		t.Fatal(err)
	}
	task, err = vm.Start(ctx)
	mustOK(t, s, task, err)

	// A lock for a period lifts by itself: wait for it through the API.
	if err := s.LockGuest(100, "backup", 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var cfg map[string]any
		if err := c.Get(ctx, "/nodes/pve1/qemu/100/config", &cfg); err != nil {
			t.Fatal(err)
		}
		if cfg["lock"] == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("timed lock never lifted")
		}
		<-time.After(5 * time.Millisecond) // polling an external condition, not ordering
	}
}

func TestFaultUnreachable(t *testing.T) {
	s := startSim(t, pvesim.Options{Guests: 1})
	c := tokenClient(s)
	ctx := ctxT(t)
	s.SetUnreachable(time.Hour)
	_, err := c.Version(ctx)
	if err == nil {
		t.Fatal("Proxmox should be unreachable")
	}
	if strings.Contains(err.Error(), "500") || errors.Is(err, proxmox.ErrNotAuthorized) {
		t.Fatalf("unreachable must look like a network failure, got %v", err)
	}
	// The control path stays up, and ends the outage.
	res, _ := raw(t, "POST", s.ControlURL()+"/unreachable?for=0s", nil, "")
	if res.StatusCode != 200 {
		t.Fatal(res.Status)
	}
	if _, err := c.Version(ctx); err != nil {
		t.Fatalf("after the outage: %v", err)
	}
}

func TestFaultResourcesLag(t *testing.T) {
	s := startSim(t, pvesim.Options{Guests: 1, Faults: pvesim.Faults{ResourcesLag: pvesim.Duration(time.Hour)}})
	c := tokenClient(s)
	ctx := ctxT(t)
	cl, _ := c.Cluster(ctx)
	rs, err := cl.Resources(ctx, "vm")
	if err != nil || rs[0].Name != "vm-100" {
		t.Fatalf("first broadcast: %v %v", rs, err)
	}
	if err := c.Put(ctx, "/nodes/pve1/qemu/100/config", map[string]any{"name": "renamed", "tags": "new"}, nil); err != nil {
		t.Fatal(err)
	}
	n, _ := c.Node(ctx, "pve1")
	task, err := n.NewVirtualMachine(ctx, 105)
	mustOK(t, s, task, err)
	rs, err = cl.Resources(ctx, "vm")
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Name != "vm-100" || rs[0].Tags != "new" {
		t.Fatalf("name lags, tags are live: name=%q tags=%q", rs[0].Name, rs[0].Tags)
	}
	if rs[1].VMID != 105 || rs[1].Status != "unknown" || rs[1].Name != "" {
		t.Fatalf("a new guest is unknown to the RRD: %+v", rs[1])
	}
	vm, _ := n.VirtualMachine(ctx, 100)
	if vm.Name != "renamed" {
		t.Fatalf("config is live: %q", vm.Name)
	}
	if err := s.UpdateFaults(func(f *pvesim.Faults) { f.ResourcesLag = 0 }); err != nil {
		t.Fatal(err)
	}
	rs, _ = cl.Resources(ctx, "vm")
	if rs[0].Name != "renamed" || rs[1].Status != "stopped" {
		t.Fatalf("after the lag: %+v", rs)
	}
}

func TestFaultIgnoredShutdown(t *testing.T) {
	s := startSim(t, pvesim.Options{Guests: 1})
	s.SetIgnoreShutdown(100, true)
	c := tokenClient(s)
	ctx := ctxT(t)
	n, _ := c.Node(ctx, "pve1")
	vm, _ := n.VirtualMachine(ctx, 100)
	task, err := vm.Shutdown(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if task = waitTask(t, s, task); task.ExitStatus != "VM quit/powerdown failed - got timeout" {
		t.Fatalf("shutdown ignored: %q", task.ExitStatus)
	}
	var upid string
	if err := c.Post(ctx, "/nodes/pve1/qemu/100/status/shutdown", map[string]any{"forceStop": 1, "timeout": 5}, &upid); err != nil {
		t.Fatal(err)
	}
	if ti, err := s.WaitTask(ctx, upid); err != nil || ti.ExitStatus != "OK" {
		t.Fatalf("forceStop shutdown: %+v %v", ti, err)
	}
}

// A reboot is an ACPI powerdown then a start. Proxmox never forces a VM's
// (qemu-server's vm_reboot stops without force: the task fails and the VM
// runs on, its pending values still pending); a container's is killed
// after the timeout (pve-container's vm_reboot).
func TestFaultIgnoredReboot(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	for _, g := range []pvesim.GuestSpec{{VMID: 100, Running: true}, {VMID: 101, Kind: pvesim.LXC, Running: true}} {
		if err := s.AddGuest(g); err != nil {
			t.Fatal(err)
		}
		s.SetIgnoreShutdown(g.VMID, true)
	}
	c := tokenClient(s)
	ctx := ctxT(t)
	if err := c.Put(ctx, "/nodes/pve1/qemu/100/config", map[string]any{"cores": 4}, nil); err != nil {
		t.Fatal(err)
	}
	var upid string
	if err := c.Post(ctx, "/nodes/pve1/qemu/100/status/reboot", map[string]any{"timeout": 5}, &upid); err != nil {
		t.Fatal(err)
	}
	if ti, err := s.WaitTask(ctx, upid); err != nil || ti.ExitStatus != "VM quit/powerdown failed - got timeout" {
		t.Fatalf("VM reboot ignored: %+v %v", ti, err)
	}
	if g, _ := s.Guest(100); g.Status != "running" || g.Pending["cores"] != "4" {
		t.Fatalf("after a failed reboot: %+v", g)
	}
	if err := c.Post(ctx, "/nodes/pve1/lxc/101/status/reboot", map[string]any{"timeout": 5}, &upid); err != nil {
		t.Fatal(err)
	}
	if ti, err := s.WaitTask(ctx, upid); err != nil || ti.ExitStatus != "OK" {
		t.Fatalf("container reboot: %+v %v", ti, err)
	}
}

// TestControlAPI drives faults over HTTP, as an operator or a non-Go test
// would.
func TestControlAPI(t *testing.T) {
	s := startSim(t, pvesim.Options{Guests: 2})
	res, body := raw(t, "PATCH", s.ControlURL()+"/faults", map[string]string{"Content-Type": "application/json"},
		`{"fail_rate":1,"task_latency":"0s","latency":"1ms"}`)
	if res.StatusCode != 200 || body["fail_rate"] != float64(1) {
		t.Fatalf("PATCH faults: %s %v", res.Status, body)
	}
	if f := s.Faults(); f.FailRate != 1 || f.Latency != pvesim.Duration(time.Millisecond) {
		t.Fatalf("faults %+v", f)
	}
	res, _ = raw(t, "PATCH", s.ControlURL()+"/faults", nil, `{"fail_rate":2}`)
	if res.StatusCode != 400 {
		t.Fatalf("fail_rate 2 must be refused: %s", res.Status)
	}
	res, _ = raw(t, "POST", s.ControlURL()+"/lock?vmid=100&lock=migrate&for=1h", nil, "")
	if g, _ := s.Guest(100); res.StatusCode != 200 || g.Lock != "migrate" {
		t.Fatalf("lock over HTTP: %s %q", res.Status, g.Lock)
	}
	res, _ = raw(t, "DELETE", s.ControlURL()+"/lock?vmid=100", nil, "")
	if g, _ := s.Guest(100); res.StatusCode != 200 || g.Lock != "" {
		t.Fatalf("unlock over HTTP: %s %q", res.Status, g.Lock)
	}
	res, _ = raw(t, "POST", s.ControlURL()+"/unreachable?for=1h", nil, "")
	if res.StatusCode != 200 {
		t.Fatal(res.Status)
	}
	if _, err := tokenClient(s).Version(context.Background()); err == nil {
		t.Fatal("unreachable over HTTP had no effect")
	}
}

// TestGoProxmoxTaskWait runs go-proxmox's own waiter against real task
// latency for an OK, a failed and a warning task. It also pins the waiter's
// traps (a failed task returns nil; warnings count as failure), which is why
// internal/pve has its own waiter.
func TestGoProxmoxTaskWait(t *testing.T) {
	s := startSim(t, pvesim.Options{Guests: 2, Faults: pvesim.Faults{TaskLatency: pvesim.Duration(20 * time.Millisecond)}})
	c := tokenClient(s)
	ctx := ctxT(t)
	n, _ := c.Node(ctx, "pve1")
	vm, _ := n.VirtualMachine(ctx, 101)

	task, err := vm.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Wait(ctx, 5*time.Millisecond, 30*time.Second); err != nil || !task.IsSuccessful || task.ExitStatus != "OK" {
		t.Fatalf("OK task: err=%v %+v", err, task)
	}
	task, err = vm.Start(ctx) // already running: the task fails
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Wait(ctx, 5*time.Millisecond, 30*time.Second); err != nil || !task.IsFailed || task.ExitStatus != "VM 101 already running" {
		t.Fatalf("failed task: err=%v %+v", err, task)
	}
	_ = s.UpdateFaults(func(f *pvesim.Faults) { f.WarnRate = 1 })
	task, err = vm.Stop(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Wait(ctx, 5*time.Millisecond, 30*time.Second); err != nil || !task.IsFailed || task.ExitStatus != "WARNINGS: 1" {
		t.Fatalf("warning task: err=%v %+v", err, task)
	}
	if g, _ := s.Guest(101); g.Status != "stopped" {
		t.Fatal("the stop with warnings did take effect")
	}
}

func TestCompleteRunningTasks(t *testing.T) {
	s := startSim(t, pvesim.Options{Guests: 2, Faults: pvesim.Faults{TaskLatency: pvesim.Duration(time.Hour)}})
	c := tokenClient(s)
	ctx := ctxT(t)
	n, _ := c.Node(ctx, "pve1")
	vm, _ := n.VirtualMachine(ctx, 101)
	task, err := vm.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g, _ := s.Guest(101); g.Status != "stopped" {
		t.Fatal("task finished early")
	}
	res, body := raw(t, "POST", s.ControlURL()+"/tasks/complete", nil, "")
	if res.StatusCode != 200 || body["completed"] != float64(1) {
		t.Fatalf("complete: %s %v", res.Status, body)
	}
	if task = waitTask(t, s, task); !task.IsSuccessful {
		t.Fatalf("task %q", task.ExitStatus)
	}
	if g, _ := s.Guest(101); g.Status != "running" {
		t.Fatal("completed start did not take effect")
	}
}
