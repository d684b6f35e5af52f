package pvesim_test

import (
	"strings"
	"testing"

	proxmox "github.com/luthermonson/go-proxmox"

	"github.com/converge-pve/converge/internal/pvesim"
)

// taskOf waits for the task a response returned and returns it.
func taskOf(t *testing.T, s *pvesim.Sim, body map[string]any) pvesim.TaskInfo {
	t.Helper()
	upid, _ := body["data"].(string)
	if !strings.HasPrefix(upid, "UPID:") {
		t.Fatalf("no UPID: %v", body)
	}
	ti, err := s.WaitTask(ctxT(t), upid)
	if err != nil {
		t.Fatal(err)
	}
	return ti
}

// TestDeleteVolume: DELETE /nodes/{node}/storage/{storage}/content/{volume}
// is pve-storage's src/PVE/API2/Storage/Content.pm "delete": an "imgdel"
// task (id "<owner>@<storage>") running PVE::Storage::vdisk_free, which
// does not look at guest configs, so a volume a config still names is
// freed and the config keeps naming it. vdisk_free refuses a base volume
// linked clones use (volume_is_base_and_used); a missing volume is a
// no-op on LVM thin (LvmThinPlugin.pm free_image), a warning on a
// directory (Plugin.pm free_image) and an error on RBD (RBDPlugin.pm
// rbd_ls_snap). $real_volume_id refuses a volume id it cannot parse.
func TestDeleteVolume(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	for _, g := range []pvesim.GuestSpec{
		{VMID: 100, Config: map[string]string{"unused0": "local-lvm:vm-100-disk-1"}},
		{VMID: 101, Config: map[string]string{"scsi1": "ceph:base-900-disk-0/vm-101-disk-0,size=4G"}},
	} {
		if err := s.AddGuest(g); err != nil {
			t.Fatal(err)
		}
	}
	c := tokenClient(s)
	n, err := c.Node(ctxT(t), "pve1")
	if err != nil {
		t.Fatal(err)
	}
	st, err := n.Storage(ctxT(t), "local-lvm")
	if err != nil {
		t.Fatal(err)
	}
	task, err := st.DeleteContent(ctxT(t), "local-lvm:vm-100-disk-1")
	mustOK(t, s, task, err)
	if !strings.Contains(string(task.UPID), ":imgdel:100@local-lvm:") {
		t.Fatalf("UPID %s, want type imgdel, id 100@local-lvm", task.UPID)
	}
	ti, _ := s.WaitTask(ctxT(t), string(task.UPID))
	if !strings.Contains(strings.Join(ti.Log, "\n"), "Removed volume 'local-lvm:vm-100-disk-1'") {
		t.Fatalf("log %q", ti.Log)
	}
	// The volume is gone from the storage; the config still names it.
	items, err := st.GetContent(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if it.Volid == "local-lvm:vm-100-disk-1" {
			t.Fatalf("freed volume still listed: %+v", it)
		}
	}
	if g, _ := s.Guest(100); g.Config["unused0"] != "local-lvm:vm-100-disk-1" {
		t.Fatalf("config changed: %v", g.Config)
	}
	// A disk in use is freed all the same (a volume name, the storage from the path).
	res, body := form(t, s, "DELETE", "/nodes/pve1/storage/local-lvm/content/vm-100-disk-0", "")
	wantStatus(t, res, body, "200 OK")
	if ti := taskOf(t, s, body); ti.ExitStatus != "OK" {
		t.Fatalf("in-use disk: %+v", ti)
	}
	res, body = form(t, s, "GET", "/nodes/pve1/storage/local-lvm/content/local-lvm:vm-100-disk-0", "")
	wantStatus(t, res, body, "500 can't get size of '/dev/pve/vm-100-disk-0':   Failed to find logical volume \"pve/vm-100-disk-0\"")

	// Missing volumes, by plugin.
	for _, tc := range []struct{ path, exit string }{
		{"/nodes/pve1/storage/local-lvm/content/local-lvm:vm-100-disk-7", "OK"},
		{"/nodes/pve1/storage/local/content/local:iso/none.iso", "WARNINGS: 1"},
		{"/nodes/pve1/storage/ceph/content/ceph:vm-100-disk-7", "rbd error: rbd: error opening image vm-100-disk-7: (2) No such file or directory"},
		// The base of 101's linked clone.
		{"/nodes/pve1/storage/ceph/content/ceph:base-900-disk-0", "base volume 'base-900-disk-0' is still in use by linked clones"},
	} {
		res, body := form(t, s, "DELETE", tc.path, "")
		wantStatus(t, res, body, "200 OK")
		if ti := taskOf(t, s, body); ti.ExitStatus != tc.exit {
			t.Errorf("DELETE %s: exit %q, want %q (log %q)", tc.path, ti.ExitStatus, tc.exit, ti.Log)
		}
	}
	// Refused before any task.
	for _, tc := range []struct{ path, status string }{
		{"/nodes/pve1/storage/local-lvm/content/ceph:vm-101-disk-0", "400 Parameter verification failed."},
		{"/nodes/pve1/storage/local-lvm/content/Bad:vm-1", "400 Parameter verification failed."},
		{"/nodes/pve1/storage/local-lvm/content/local-lvm:foo", "500 unable to parse lvm volume name 'foo'"},
		// Content.pm delete: PVE::Storage::path runs Plugin.pm parse_volname.
		{"/nodes/pve1/storage/local/content/local:iso/doesnt-exist", "500 unable to parse directory volume name 'iso/doesnt-exist'"},
		{"/nodes/pve1/storage/nfs/content/nfs:iso/x.iso", "500 storage 'nfs' does not exist"},
	} {
		res, body := form(t, s, "DELETE", tc.path, "")
		wantStatus(t, res, body, tc.status)
	}
}

// TestMoveDisk: POST /nodes/{node}/qemu/{vmid}/move_disk with a target
// storage, as qemu-server's src/PVE/API2/Qemu.pm move_vm_disk does it:
// $load_and_check_move before forking (locked, unknown disk, cdrom, same
// storage: 500; a storage without images: 400), then a "qmmove" task that
// copies the volume to a new vm-<vmid>-disk-<n> on the target
// (PVE::QemuServer clone_disk: size kept, format dropped) and keeps the
// source as unusedN (add_unused_volume) or frees it with delete=1.
func TestMoveDisk(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	if err := s.AddGuest(pvesim.GuestSpec{VMID: 100, Config: map[string]string{
		"scsi1": "local-lvm:vm-100-disk-1,iothread=1,size=4G", "ide2": "local:iso/x.iso,media=cdrom",
	}}); err != nil {
		t.Fatal(err)
	}
	c := tokenClient(s)
	n, err := c.Node(ctxT(t), "pve1")
	if err != nil {
		t.Fatal(err)
	}
	vm, err := n.VirtualMachine(ctxT(t), 100)
	if err != nil {
		t.Fatal(err)
	}
	task, err := vm.MoveDisk(ctxT(t), "scsi1", &proxmox.VirtualMachineMoveDiskOptions{Storage: "ceph"})
	mustOK(t, s, task, err)
	if !strings.Contains(string(task.UPID), ":qmmove:100:") {
		t.Fatalf("UPID %s", task.UPID)
	}
	g, _ := s.Guest(100)
	if g.Config["scsi1"] != "ceph:vm-100-disk-0,iothread=1,size=4G" || g.Config["unused0"] != "local-lvm:vm-100-disk-1" {
		t.Fatalf("after move: %v", g.Config)
	}
	ti, _ := s.WaitTask(ctxT(t), string(task.UPID))
	log := strings.Join(ti.Log, "\n")
	for _, want := range []string{
		"copying volume 'local-lvm:vm-100-disk-1' from current storage 'local-lvm' to target storage 'ceph'",
		"adding source volume 'local-lvm:vm-100-disk-1' as 'unused0' to config",
	} {
		if !strings.Contains(log, want) {
			t.Fatalf("log %q lacks %q", ti.Log, want)
		}
	}
	// delete=1 frees the source; a format the storage lacks is warned about.
	task, err = vm.MoveDisk(ctxT(t), "scsi0", &proxmox.VirtualMachineMoveDiskOptions{Storage: "ceph", Delete: true, Format: "qcow2"})
	if err != nil {
		t.Fatal(err)
	}
	ti, _ = s.WaitTask(ctxT(t), string(task.UPID))
	if ti.ExitStatus != "WARNINGS: 1" || !strings.Contains(strings.Join(ti.Log, "\n"), "WARN: format 'qcow2' is not supported by the target storage 'ceph' - using 'raw' instead") {
		t.Fatalf("qcow2 move: %+v", ti)
	}
	g, _ = s.Guest(100)
	if !strings.HasPrefix(g.Config["scsi0"], "ceph:vm-100-disk-1,") || g.Config["unused1"] != "" {
		t.Fatalf("after delete=1 move: %v", g.Config)
	}

	for _, tc := range []struct{ body, status string }{
		{"disk=scsi1&storage=ceph", "500 you can't move to the same storage with same format"},
		{"disk=scsi5&storage=local-lvm", "500 disk 'scsi5' does not exist"},
		{"disk=ide2&storage=local-lvm", "500 you can't move a cdrom"},
		{"disk=scsi1&storage=local", "400 Parameter verification failed."},
		{"disk=scsi1&storage=nfs", "500 storage 'nfs' does not exist"},
		{"disk=scsi1", "400 Parameter verification failed."},
		{"disk=scsi1&storage=local-lvm&target-vmid=101", "400 Parameter verification failed."},
		{"disk=sda&storage=local-lvm", "400 Parameter verification failed."},
	} {
		res, body := form(t, s, "POST", "/nodes/pve1/qemu/100/move_disk", tc.body)
		wantStatus(t, res, body, tc.status)
	}
	if err := s.LockGuest(100, "backup", 0); err != nil {
		t.Fatal(err)
	}
	res, body := form(t, s, "POST", "/nodes/pve1/qemu/100/move_disk", "disk=scsi1&storage=local-lvm")
	wantStatus(t, res, body, "500 VM is locked (backup)")
}

// TestDownloadURL: POST /nodes/{node}/storage/{storage}/download-url, as
// pve-storage's src/PVE/API2/Storage/Status.pm download_url: a file based
// storage holding the content type (else 500), a filename with the type's
// extension ($ISO_EXT_RE_0, $VZTMPL_EXT_RE_1; else 400) after
// normalize_content_filename, then a "download" task (id the filename)
// after which the file is in the storage's content (Plugin.pm
// list_volumes: format "iso" for an ISO image) and can be deleted.
func TestDownloadURL(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	c := tokenClient(s)
	n, err := c.Node(ctxT(t), "pve1")
	if err != nil {
		t.Fatal(err)
	}
	st, err := n.Storage(ctxT(t), "local")
	if err != nil {
		t.Fatal(err)
	}
	task, err := st.DownloadURL(ctxT(t), "iso", "debian 13.iso", "https://example.org/debian.iso")
	mustOK(t, s, task, err)
	if !strings.Contains(string(task.UPID), ":download:debian_13.iso:") {
		t.Fatalf("UPID %s", task.UPID)
	}
	task, err = st.DownloadURL(ctxT(t), "vztmpl", "deb.tar.zst", "http://example.org/deb.tar.zst")
	mustOK(t, s, task, err)
	items, err := st.GetContent(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 2 || items[0].Volid != "local:iso/debian_13.iso" || items[0].Format != "iso" ||
		items[1].Volid != "local:vztmpl/deb.tar.zst" {
		t.Fatalf("content %+v", items)
	}
	task, err = st.DeleteContent(ctxT(t), "local:iso/debian_13.iso")
	mustOK(t, s, task, err)
	if !strings.Contains(string(task.UPID), ":imgdel:local:") {
		t.Fatalf("UPID %s", task.UPID)
	}
	if items, _ := st.GetContent(ctxT(t)); len(items) != 1 {
		t.Fatalf("content after delete %+v", items)
	}

	for _, tc := range []struct{ path, body, status string }{
		{"local-lvm", "url=https://x/a.iso&content=iso&filename=a.iso", "500 can't upload to storage type 'lvmthin', not a file based storage!"},
		{"local", "url=https://x/a.ova&content=import&filename=a.ova", "500 storage 'local' is not configured for content-type 'import'"},
		{"local", "url=https://x/a.iso&content=iso&filename=a.qcow2", "400 Parameter verification failed."},
		{"local", "url=https://x/a.iso&content=vztmpl&filename=a.iso", "400 Parameter verification failed."},
		{"local", "url=ftp://x/a.iso&content=iso&filename=a.iso", "400 Parameter verification failed."},
		{"local", "url=https://x/a.iso&content=backup&filename=a.iso", "400 Parameter verification failed."},
	} {
		res, body := form(t, s, "POST", "/nodes/pve1/storage/"+tc.path+"/download-url", tc.body)
		wantStatus(t, res, body, tc.status)
	}
}
