package pvesim_test

import (
	"context"
	"errors"
	"testing"
	"time"

	proxmox "github.com/luthermonson/go-proxmox"

	"github.com/converge-pve/converge/internal/pvesim"
)

// Per-task-type latency: each type runs as long as its entry says, zero
// included, and types without one run TaskLatency. No assertion depends on
// how fast the host is: the long latencies are an hour, the short ones end
// far inside the waits that observe them.

func TestTaskLatencyByType(t *testing.T) {
	s := startSim(t, pvesim.Options{Nodes: 1, Faults: pvesim.Faults{
		TaskLatency:       pvesim.Duration(time.Hour),
		TaskLatencyByType: map[string]pvesim.Duration{"qmconfig": 0},
	}})
	for _, vmid := range []int{100, 101} {
		if err := s.AddGuest(pvesim.GuestSpec{VMID: vmid}); err != nil {
			t.Fatal(err)
		}
	}
	// qmstart has no entry: TaskLatency (an hour).
	start, err := callData(t, s, "POST", "/nodes/pve1/qemu/100/status/start", nil)
	if err != nil {
		t.Fatal(err)
	}
	if ti := taskInfo(t, s, start); !ti.Running || ti.Type != "qmstart" {
		t.Fatalf("start task right after the call: %+v", ti)
	}
	// qmconfig's entry is zero: the task has ended before its UPID is answered.
	cfg, err := callData(t, s, "POST", "/nodes/pve1/qemu/101/config", map[string]any{"cores": 2})
	if err != nil {
		t.Fatal(err)
	}
	if ti := taskInfo(t, s, cfg); ti.Running || ti.ExitStatus != "OK" || ti.Type != "qmconfig" {
		t.Fatalf("config task with zero latency: %+v", ti)
	}
	if g, _ := s.Guest(101); g.Config["cores"] != "2" {
		t.Fatalf("config not applied: %v", g.Config)
	}
	// An entry overrides TaskLatency the other way too.
	if err := s.UpdateFaults(func(f *pvesim.Faults) {
		f.TaskLatency = 0
		f.TaskLatencyByType["qmstop"] = pvesim.Duration(time.Hour)
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishTask(start.(string)); err != nil {
		t.Fatal(err)
	}
	stop, err := callData(t, s, "POST", "/nodes/pve1/qemu/100/status/stop", nil)
	if err != nil {
		t.Fatal(err)
	}
	if ti := taskInfo(t, s, stop); !ti.Running {
		t.Fatalf("qmstop with an hour's latency ended at once: %+v", ti)
	}
	if g, _ := s.Guest(100); g.Status != "running" {
		t.Fatalf("a running stop task stopped the guest: %s", g.Status)
	}
	start2, err := callData(t, s, "POST", "/nodes/pve1/qemu/101/status/start", nil)
	if err != nil {
		t.Fatal(err)
	}
	if ti := taskInfo(t, s, start2); ti.Running || ti.ExitStatus != "OK" {
		t.Fatalf("qmstart without an entry, TaskLatency 0: %+v", ti)
	}
	if err := s.FinishTask(stop.(string)); err != nil {
		t.Fatal(err)
	}
}

// TestConfigBackgroundDelayWithTypeLatency: a QEMU config POST with
// background_delay answers null when its qmconfig task finished within the
// delay, and the task's UPID, the task still running, when it did not.
func TestConfigBackgroundDelayWithTypeLatency(t *testing.T) {
	s := startSim(t, pvesim.Options{Nodes: 1, Faults: pvesim.Faults{
		TaskLatencyByType: map[string]pvesim.Duration{"qmconfig": pvesim.Duration(10 * time.Millisecond), "qmstart": pvesim.Duration(time.Hour)},
	}})
	if err := s.AddGuest(pvesim.GuestSpec{VMID: 100}); err != nil {
		t.Fatal(err)
	}
	node, err := tokenClient(s).Node(ctxT(t), "pve1")
	if err != nil {
		t.Fatal(err)
	}
	guest, err := node.VirtualMachine(ctxT(t), 100)
	if err != nil {
		t.Fatal(err)
	}
	// 10 ms of work within a 30 s delay: null, and the change is in.
	data, err := callData(t, s, "POST", "/nodes/pve1/qemu/100/config", map[string]any{"cores": 2, "background_delay": 30})
	if err != nil || data != nil {
		t.Fatalf("answer %v, %v; want null", data, err)
	}
	if g, _ := s.Guest(100); g.Config["cores"] != "2" {
		t.Fatalf("config not applied when the answer came: %v", g.Config)
	}
	tasks := s.Tasks()
	if last := tasks[len(tasks)-1]; last.Type != "qmconfig" || last.Running || last.ExitStatus != "OK" {
		t.Fatalf("the config task: %+v", last)
	}
	// go-proxmox reads the null as no task; without background_delay the
	// answer is the task.
	bd := proxmox.VirtualMachineOption{Name: "background_delay", Value: 30}
	if task, err := guest.Config(ctxT(t), proxmox.VirtualMachineOption{Name: "cores", Value: 1}, bd); err != nil || task != nil {
		t.Fatalf("go-proxmox with background_delay: %v %v", task, err)
	}
	if task, err := guest.Config(ctxT(t), proxmox.VirtualMachineOption{Name: "cores", Value: 2}); err != nil || task == nil {
		t.Fatalf("without background_delay a config write answers its task: %v %v", task, err)
	} else if _, err := s.WaitTask(ctxT(t), string(task.UPID)); err != nil {
		t.Fatal(err)
	}
	// An hour of work outlasts a 1 s delay: the UPID, the task running.
	if err := s.UpdateFaults(func(f *pvesim.Faults) { f.TaskLatencyByType["qmconfig"] = pvesim.Duration(time.Hour) }); err != nil {
		t.Fatal(err)
	}
	data, err = callData(t, s, "POST", "/nodes/pve1/qemu/100/config", map[string]any{"cores": 3, "background_delay": 1})
	if err != nil {
		t.Fatal(err)
	}
	ti := taskInfo(t, s, data)
	if !ti.Running || ti.Type != "qmconfig" {
		t.Fatalf("answer to a write that outlasts background_delay: %+v", ti)
	}
	if g, _ := s.Guest(100); g.Config["cores"] != "2" {
		t.Fatalf("a running config task changed the config: %v", g.Config)
	}
	if err := s.FinishTask(ti.UPID); err != nil {
		t.Fatal(err)
	}
	if g, _ := s.Guest(100); g.Config["cores"] != "3" {
		t.Fatalf("the finished config task did not apply: %v", g.Config)
	}
}

// TestPutConfigRunsConfigWorkerInline: qemu-server's synchronous config
// update runs the qmconfig worker inside the request, so it answers only
// once that worker's time has passed, applying the change then; no task
// is made. A container's update has no such worker.
func TestPutConfigRunsConfigWorkerInline(t *testing.T) {
	s := startSim(t, pvesim.Options{Nodes: 1, Faults: pvesim.Faults{
		TaskLatencyByType: map[string]pvesim.Duration{"qmconfig": pvesim.Duration(time.Hour)},
	}})
	if err := s.AddGuest(pvesim.GuestSpec{VMID: 100}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddGuest(pvesim.GuestSpec{VMID: 200, Kind: pvesim.LXC}); err != nil {
		t.Fatal(err)
	}
	c := tokenClient(s)
	ctx, cancel := context.WithTimeout(ctxT(t), 200*time.Millisecond)
	defer cancel()
	err := c.Put(ctx, "/nodes/pve1/qemu/100/config", map[string]any{"cores": 4}, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("PUT with an hour of qmconfig work answered: %v", err)
	}
	if g, _ := s.Guest(100); g.Config["cores"] != "1" {
		t.Fatalf("the change took effect before its worker's time: %v", g.Config)
	}
	if len(s.Tasks()) != 0 {
		t.Fatalf("a synchronous update made a task: %+v", s.Tasks())
	}
	if err := c.Put(ctxT(t), "/nodes/pve1/lxc/200/config", map[string]any{"cores": 2}, nil); err != nil {
		t.Fatal(err)
	}
	if g, _ := s.Guest(200); g.Config["cores"] != "2" {
		t.Fatalf("container update: %v", g.Config)
	}
	if err := s.UpdateFaults(func(f *pvesim.Faults) { f.TaskLatencyByType["qmconfig"] = pvesim.Duration(time.Millisecond) }); err != nil {
		t.Fatal(err)
	}
	if err := c.Put(ctxT(t), "/nodes/pve1/qemu/100/config", map[string]any{"cores": 3}, nil); err != nil {
		t.Fatal(err)
	}
	if g, _ := s.Guest(100); g.Config["cores"] != "3" {
		t.Fatalf("answered before the change took effect: %v", g.Config)
	}
}

// TestTaskLatencyByTypeSetting: unknown types and negative durations are
// refused wherever faults are set; the control API merges entries; Faults
// hands out a copy.
func TestTaskLatencyByTypeSetting(t *testing.T) {
	if _, err := pvesim.New(pvesim.Options{Faults: pvesim.Faults{TaskLatencyByType: map[string]pvesim.Duration{"start": 1}}}); err == nil {
		t.Fatal("an unknown task type was accepted")
	}
	s := startSim(t, pvesim.Options{})
	if err := s.SetFaults(pvesim.Faults{TaskLatencyByType: map[string]pvesim.Duration{"qmstart": -1}}); err == nil {
		t.Fatal("a negative latency was accepted")
	}
	hdr := map[string]string{"Content-Type": "application/json"}
	res, body := raw(t, "PATCH", s.ControlURL()+"/faults", hdr, `{"task_latency_by_type":{"qmstart":"1s"}}`)
	if res.StatusCode != 200 {
		t.Fatalf("PATCH: %s %v", res.Status, body)
	}
	res, body = raw(t, "PATCH", s.ControlURL()+"/faults", hdr, `{"task_latency_by_type":{"qmconfig":"200ms"}}`)
	if res.StatusCode != 200 {
		t.Fatalf("PATCH: %s %v", res.Status, body)
	}
	f := s.Faults()
	if f.TaskLatencyFor("qmstart") != time.Second || f.TaskLatencyFor("qmconfig") != 200*time.Millisecond || f.TaskLatencyFor("vzstart") != 0 {
		t.Fatalf("merged faults %+v", f)
	}
	f.TaskLatencyByType["qmstart"] = 0
	if s.Faults().TaskLatencyFor("qmstart") != time.Second {
		t.Fatal("changing the map Faults returned changed the simulator's")
	}
	res, _ = raw(t, "PATCH", s.ControlURL()+"/faults", hdr, `{"task_latency_by_type":{"qmstrat":"1s"}}`)
	if res.StatusCode != 400 {
		t.Fatalf("a misspelt type over HTTP: %s", res.Status)
	}
	if m, err := pvesim.ParseTaskLatencies([]string{"qmstart=1s", "qmconfig=200ms"}); err != nil || len(m) != 2 ||
		m["qmconfig"] != pvesim.Duration(200*time.Millisecond) {
		t.Fatalf("ParseTaskLatencies: %v %v", m, err)
	}
	for _, bad := range []string{"qmstart", "=1s", "qmstart=soon", "start=1s"} {
		if _, err := pvesim.ParseTaskLatencies([]string{bad}); err == nil {
			t.Errorf("ParseTaskLatencies(%q) accepted", bad)
		}
	}
}

// taskInfo looks a task up by the UPID a call answered.
func taskInfo(t *testing.T, s *pvesim.Sim, data any) pvesim.TaskInfo {
	t.Helper()
	upid, ok := data.(string)
	if !ok {
		t.Fatalf("answer %v is not a UPID", data)
	}
	for _, ti := range s.Tasks() {
		if ti.UPID == upid {
			return ti
		}
	}
	t.Fatalf("no task %s", upid)
	return pvesim.TaskInfo{}
}
