package pvesim_test

import (
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/pvesim"
)

// callData sends a request through go-proxmox and returns the answer's
// data (a UPID, nil, or what a read returns).
func callData(t *testing.T, s *pvesim.Sim, method, path string, body map[string]any) (any, error) {
	t.Helper()
	c := tokenClient(s)
	var out any
	var err error
	switch method {
	case "PUT":
		err = c.Put(ctxT(t), path, body, &out)
	case "POST":
		err = c.Post(ctxT(t), path, body, &out)
	case "DELETE":
		err = c.Delete(ctxT(t), path, &out)
	case "GET":
		err = c.Get(ctxT(t), path, &out)
	}
	return out, err
}

// waitUPID waits for a task given as an answer's data and returns it.
func waitUPID(t *testing.T, s *pvesim.Sim, data any) pvesim.TaskInfo {
	t.Helper()
	upid, ok := data.(string)
	if !ok {
		t.Fatalf("answer %v is not a UPID", data)
	}
	ti, err := s.WaitTask(ctxT(t), upid)
	if err != nil {
		t.Fatal(err)
	}
	return ti
}

// TestResizeQEMU follows qemu-server's resize_vm (PVE 8: a "resize" task
// whose worker does every check): grow by "+N" or to an absolute size,
// size= rewritten with format_size, shrinking refused, the same size a
// no-op; it applies at once on a running VM with other changes pending.
func TestResizeQEMU(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	if err := s.AddGuest(pvesim.GuestSpec{VMID: 100, Running: true, Config: map[string]string{
		"ide2": "local:iso/debian.iso,media=cdrom"}}); err != nil {
		t.Fatal(err)
	}
	path := "/nodes/pve1/qemu/100"
	if _, err := callData(t, s, "PUT", path+"/config", map[string]any{"cores": 4}); err != nil {
		t.Fatal(err)
	}
	data, err := callData(t, s, "PUT", path+"/resize", map[string]any{"disk": "scsi0", "size": "+2G"})
	if err != nil {
		t.Fatal(err)
	}
	ti := waitUPID(t, s, data)
	if ti.Type != "resize" || ti.ExitStatus != "OK" || ti.ID != "100" {
		t.Fatalf("task %+v", ti)
	}
	g, _ := s.Guest(100)
	if g.Config["scsi0"] != "local-lvm:vm-100-disk-0,iothread=1,size=34G" || g.Pending["cores"] != "4" {
		t.Fatalf("after resize: %+v", g)
	}
	if _, inPending := g.Pending["scsi0"]; inPending {
		t.Fatal("resize went to pending")
	}
	data, _ = callData(t, s, "PUT", path+"/resize", map[string]any{"disk": "scsi0", "size": "40000M"})
	waitUPID(t, s, data)
	if g, _ := s.Guest(100); g.Config["scsi0"] != "local-lvm:vm-100-disk-0,iothread=1,size=40000M" {
		t.Fatalf("absolute resize: %s", g.Config["scsi0"])
	}
	for size, want := range map[string]string{
		"10G":    "shrinking disks is not supported",
		"40000M": "OK", // same size: nothing to do
	} {
		data, err := callData(t, s, "PUT", path+"/resize", map[string]any{"disk": "scsi0", "size": size})
		if err != nil {
			t.Fatal(err)
		}
		if ti := waitUPID(t, s, data); ti.ExitStatus != want {
			t.Fatalf("resize to %s: %q, want %q", size, ti.ExitStatus, want)
		}
	}
	for disk, want := range map[string]string{"scsi1": "disk 'scsi1' does not exist", "ide2": "you can't resize a cdrom"} {
		data, _ := callData(t, s, "PUT", path+"/resize", map[string]any{"disk": disk, "size": "+1G"})
		if ti := waitUPID(t, s, data); ti.ExitStatus != want {
			t.Fatalf("resize %s: %q, want %q", disk, ti.ExitStatus, want)
		}
	}
	data, _ = callData(t, s, "PUT", path+"/resize", map[string]any{"disk": "scsi0", "size": "+1G", "digest": "0000"})
	if ti := waitUPID(t, s, data); ti.ExitStatus != "checksum mismatch (file change by other user?)" {
		t.Fatalf("stale digest: %q", ti.ExitStatus)
	}
	if err := s.LockGuest(100, "backup", 0); err != nil {
		t.Fatal(err)
	}
	data, _ = callData(t, s, "PUT", path+"/resize", map[string]any{"disk": "scsi0", "size": "+1G"})
	if ti := waitUPID(t, s, data); ti.ExitStatus != "VM is locked (backup)" {
		t.Fatalf("locked: %q", ti.ExitStatus)
	}
	_, err = callData(t, s, "PUT", path+"/resize", map[string]any{"disk": "scsi99", "size": "+1G"})
	errContains(t, err, "400")
	_, err = callData(t, s, "PUT", path+"/resize", map[string]any{"disk": "scsi0", "size": "-1G"})
	errContains(t, err, "400")
}

// TestResizeQEMUPVE7 is the synchronous variant of qemu-server < 8.0.2:
// null on success, errors as HTTP 500.
func TestResizeQEMUPVE7(t *testing.T) {
	s := startSim(t, pvesim.Options{Version: "7"})
	if err := s.AddGuest(pvesim.GuestSpec{VMID: 100}); err != nil {
		t.Fatal(err)
	}
	data, err := callData(t, s, "PUT", "/nodes/pve1/qemu/100/resize", map[string]any{"disk": "scsi0", "size": "+512M"})
	if err != nil || data != nil {
		t.Fatalf("answer %v, %v; want null", data, err)
	}
	if g, _ := s.Guest(100); g.Config["scsi0"] != "local-lvm:vm-100-disk-0,iothread=1,size=33280M" {
		t.Fatalf("scsi0 %s", g.Config["scsi0"])
	}
	_, err = callData(t, s, "PUT", "/nodes/pve1/qemu/100/resize", map[string]any{"disk": "scsi0", "size": "1G"})
	errContains(t, err, "500 shrinking disks is not supported")
}

// TestResizeLXC follows pve-container: checks before the task (500
// "unable to shrink disk size", "disk is already at specified size"),
// then a "resize" task; the size is written when it ends.
func TestResizeLXC(t *testing.T) {
	s := startSim(t, pvesim.Options{Faults: pvesim.Faults{TaskLatency: pvesim.Duration(time.Hour)}})
	if err := s.AddGuest(pvesim.GuestSpec{VMID: 200, Kind: pvesim.LXC, Running: true}); err != nil {
		t.Fatal(err)
	}
	path := "/nodes/pve1/lxc/200/resize"
	_, err := callData(t, s, "PUT", path, map[string]any{"disk": "rootfs", "size": "4G"})
	errContains(t, err, "500 unable to shrink disk size")
	_, err = callData(t, s, "PUT", path, map[string]any{"disk": "rootfs", "size": "8G"})
	errContains(t, err, "500 disk is already at specified size")
	data, err := callData(t, s, "PUT", path, map[string]any{"disk": "rootfs", "size": "+1.5G"})
	if err != nil {
		t.Fatal(err)
	}
	if g, _ := s.Guest(200); g.Config["rootfs"] != "local-lvm:vm-200-disk-0,size=8G" {
		t.Fatalf("resized before the task ended: %s", g.Config["rootfs"])
	}
	if err := s.UpdateFaults(func(f *pvesim.Faults) { f.TaskLatency = 0 }); err != nil {
		t.Fatal(err)
	}
	upid := data.(string)
	if ti := finishNow(t, s, upid); ti.ExitStatus != "interrupted by signal" {
		t.Fatalf("stopped task %+v", ti)
	}
	if g, _ := s.Guest(200); g.Config["rootfs"] != "local-lvm:vm-200-disk-0,size=8G" {
		t.Fatalf("a stopped resize changed the size: %s", g.Config["rootfs"])
	}
	data, err = callData(t, s, "PUT", path, map[string]any{"disk": "rootfs", "size": "+1.5G"})
	if err != nil {
		t.Fatal(err)
	}
	if ti := waitUPID(t, s, data); ti.Type != "resize" || ti.ExitStatus != "OK" {
		t.Fatalf("task %+v", ti)
	}
	if g, _ := s.Guest(200); g.Config["rootfs"] != "local-lvm:vm-200-disk-0,size=9728M" {
		t.Fatalf("rootfs %s", g.Config["rootfs"])
	}
	_, err = callData(t, s, "PUT", path, map[string]any{"disk": "mp0", "size": "+1G"})
	errContains(t, err, "500 format error")
	if err := s.LockGuest(200, "backup", 0); err != nil {
		t.Fatal(err)
	}
	_, err = callData(t, s, "PUT", path, map[string]any{"disk": "rootfs", "size": "+1G"})
	errContains(t, err, "500 CT is locked (backup)")
}

// finishNow stops a running task over the API (DELETE …/tasks/{upid}).
func finishNow(t *testing.T, s *pvesim.Sim, upid string) pvesim.TaskInfo {
	t.Helper()
	if _, err := callData(t, s, "DELETE", "/nodes/pve1/tasks/"+upid, nil); err != nil {
		t.Fatal(err)
	}
	ti, err := s.WaitTask(ctxT(t), upid)
	if err != nil {
		t.Fatal(err)
	}
	return ti
}
