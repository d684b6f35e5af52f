package pvesim_test

import (
	"strings"
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/pvesim"
)

// TestZFSPoolConfig: local-zfs is a zfspool section of storage.cfg as the
// installer writes it on a ZFS root (pool rpool/data, sparse, content
// images,rootdir), answered by pve-storage's Config.pm "read" and "index"
// (sparse, a boolean of ZFSPoolPlugin's properties, as 1), and listed by
// every node as a local storage (Status.pm "index": shared 0).
func TestZFSPoolConfig(t *testing.T) {
	s := startSim(t, pvesim.Options{Nodes: 2})
	st, got, _ := getJSON(t, s, "/storage/local-zfs")
	if st != "200 OK" || !strings.Contains(got, `"content":"images,rootdir",`) ||
		!strings.Contains(got, `"pool":"rpool/data","sparse":1,"storage":"local-zfs","type":"zfspool"}`) {
		t.Fatalf("/storage/local-zfs: %s %s", st, got)
	}
	if st, got, _ := getJSON(t, s, "/storage?type=zfspool"); st != "200 OK" || strings.Count(got, `"storage"`) != 1 {
		t.Fatalf("/storage?type=zfspool: %s %s", st, got)
	}
	for _, n := range []string{"pve1", "pve2"} {
		_, got, _ := getJSON(t, s, "/nodes/"+n+"/storage/local-zfs/status")
		if !strings.Contains(got, `"shared":0,`) || !strings.Contains(got, `"type":"zfspool"`) {
			t.Fatalf("%s's local-zfs: %s", n, got)
		}
	}
}

// TestZFSPoolVolumes pins how guests' volumes are named on a zfspool: a
// container's root disk is a ZFS filesystem (pve-container PVE/LXC.pm
// alloc_disk allocates format "subvol" on a zfspool; ZFSPoolPlugin
// alloc_image/find_free_diskname name it subvol-<vmid>-disk-<n>), a VM's
// disk a zvol (vm-…); converting to a template renames them basevol-…
// and base-… (ZFSPoolPlugin create_base); a linked clone is named
// <base>/<name>, a subvol- of a basevol-, a vm- of a base- (clone_image);
// a full clone's volume is allocated as on a create (to local-lvm: a
// raw vm-…). parse_volname gives the format: subvol for subvol-/basevol-,
// raw otherwise, as content listings (list_images) and the volume's info
// (path: the filesystem's mount point, the zvol's device) report it.
func TestZFSPoolVolumes(t *testing.T) {
	s := startSim(t, pvesim.Options{Nodes: 2})
	if err := s.AddGuest(pvesim.GuestSpec{VMID: 9001, Kind: pvesim.LXC, Template: true}); err != nil { // on local-lvm
		t.Fatal(err)
	}
	do := func(method, path, body string) {
		t.Helper()
		res, m := form(t, s, method, path, body)
		wantStatus(t, res, m, "200 OK")
		upidOf(t, s, m)
	}
	conf := func(vmid int, key string) string {
		t.Helper()
		g, ok := s.Guest(vmid)
		if !ok {
			t.Fatalf("no guest %d", vmid)
		}
		return g.Config[key]
	}
	do("POST", "/nodes/pve1/lxc", "vmid=300&ostemplate=local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst&rootfs=local-zfs:8")
	do("POST", "/nodes/pve1/qemu", "vmid=301&scsi0=local-zfs:4")
	if a, b := conf(300, "rootfs"), conf(301, "scsi0"); a != "local-zfs:subvol-300-disk-0,size=8G" || b != "local-zfs:vm-301-disk-0,size=4G" {
		t.Fatalf("created: rootfs %q, scsi0 %q", a, b)
	}
	do("POST", "/nodes/pve1/lxc/300/template", "")
	do("POST", "/nodes/pve1/qemu/301/template", "")
	if a, b := conf(300, "rootfs"), conf(301, "scsi0"); a != "local-zfs:basevol-300-disk-0,size=8G" || b != "local-zfs:base-301-disk-0,size=4G" {
		t.Fatalf("templates: rootfs %q, scsi0 %q", a, b)
	}
	do("POST", "/nodes/pve1/lxc/300/clone", "newid=310")
	do("POST", "/nodes/pve1/qemu/301/clone", "newid=311")
	do("POST", "/nodes/pve1/lxc/300/clone", "newid=312&full=1&storage=local-lvm")
	do("POST", "/nodes/pve1/lxc/9001/clone", "newid=313&full=1&storage=local-zfs")
	for _, c := range []struct {
		vmid      int
		key, want string
	}{
		{310, "rootfs", "local-zfs:basevol-300-disk-0/subvol-310-disk-0,size=8G"},
		{311, "scsi0", "local-zfs:base-301-disk-0/vm-311-disk-0,size=4G"},
		{312, "rootfs", "local-lvm:vm-312-disk-0,size=8G"},
		{313, "rootfs", "local-zfs:subvol-313-disk-0,size=8G"},
	} {
		if got := conf(c.vmid, c.key); got != c.want {
			t.Errorf("%d's %s: %q, want %q", c.vmid, c.key, got, c.want)
		}
	}
	// A local storage: pve1 lists its volumes, pve2 none.
	want := `[{"content":"images","format":"raw","size":4294967296,"vmid":301,"volid":"local-zfs:base-301-disk-0"},` +
		`{"content":"images","format":"raw","size":4294967296,"vmid":311,"volid":"local-zfs:base-301-disk-0/vm-311-disk-0"},` +
		`{"content":"rootdir","format":"subvol","size":8589934592,"vmid":300,"volid":"local-zfs:basevol-300-disk-0"},` +
		`{"content":"rootdir","format":"subvol","size":8589934592,"vmid":310,"volid":"local-zfs:basevol-300-disk-0/subvol-310-disk-0"},` +
		`{"content":"rootdir","format":"subvol","size":8589934592,"vmid":313,"volid":"local-zfs:subvol-313-disk-0"}]`
	if _, got, _ := getJSON(t, s, "/nodes/pve1/storage/local-zfs/content"); got != want {
		t.Fatalf("local-zfs on pve1:\n got %s\nwant %s", got, want)
	}
	if _, got, _ := getJSON(t, s, "/nodes/pve2/storage/local-zfs/content"); got != `[]` {
		t.Fatalf("local-zfs on pve2: %s", got)
	}
	for _, c := range []struct{ vol, status, data string }{
		{"local-zfs:subvol-313-disk-0", "200 OK", `{"format":"subvol","path":"/rpool/data/subvol-313-disk-0","size":8589934592,"used":0}`},
		{"local-zfs:base-301-disk-0/vm-311-disk-0", "200 OK", `{"format":"raw","path":"/dev/zvol/rpool/data/vm-311-disk-0","size":4294967296,"used":0}`},
		{"local-zfs:vm-999-disk-0", "500 zfs error: cannot open 'rpool/data/vm-999-disk-0': dataset does not exist", "null"},
		{"local-zfs:disk-0", "500 unable to parse zfs volume name 'disk-0'", "null"},
	} {
		if st, got, _ := getJSON(t, s, "/nodes/pve1/storage/local-zfs/content/"+c.vol); st != c.status || got != c.data {
			t.Errorf("info %s: %s %s, want %s %s", c.vol, st, got, c.status, c.data)
		}
	}
}

// TestZFSPoolFree: pve-storage's vdisk_free refuses a base volume a linked
// clone still uses (ZFSPoolPlugin parse_volname gives the clone's base,
// as RBD's does), and freeing a dataset that is not there succeeds
// quietly (zfs_delete_zvol takes "dataset does not exist" for done).
func TestZFSPoolFree(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	for _, g := range []pvesim.GuestSpec{
		{VMID: 9001, Kind: pvesim.LXC, Template: true, Config: map[string]string{"rootfs": "local-zfs:basevol-9001-disk-0,size=8G"}},
		{VMID: 100, Kind: pvesim.LXC, Config: map[string]string{"rootfs": "local-zfs:basevol-9001-disk-0/subvol-100-disk-0,size=8G"}},
	} {
		if err := s.AddGuest(g); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ vol, exit string }{
		{"local-zfs:basevol-9001-disk-0", "base volume 'basevol-9001-disk-0' is still in use by linked clones"},
		{"local-zfs:subvol-555-disk-0", "OK"},
	} {
		res, body := form(t, s, "DELETE", "/nodes/pve1/storage/local-zfs/content/"+c.vol, "")
		wantStatus(t, res, body, "200 OK")
		upid, _ := body["data"].(string)
		ti, err := s.WaitTask(ctxT(t), upid)
		if err != nil || ti.ExitStatus != c.exit { // "OK": no warning either
			t.Errorf("free %s: %q %v, want %q", c.vol, ti.ExitStatus, err, c.exit)
		}
	}
}

// TestZFSPoolLock: local-zfs is not shared, so its lock is each node's
// own flock (PVE::Storage::Plugin::cluster_lock_storage takes
// PVE::Tools::lock_file on /var/lock/pve-manager/pve-storage-<id> for a
// storage without "shared"): a clone allocating on pve1's local-zfs
// waits for pve1's holder and times out with lock_file's message, while
// one on pve2's local-zfs takes pve2's lock at once.
func TestZFSPoolLock(t *testing.T) {
	s := lockSim(t, pvesim.Faults{StorageLockHold: pvesim.Duration(time.Hour), StorageLockTimeout: pvesim.Duration(time.Millisecond)})
	cloneTask(t, s, "/nodes/pve1/qemu/9000/clone", "newid=200&full=1&storage=local-zfs") // holds pve1's lock
	for _, c := range []struct{ path, body, want string }{
		{"/nodes/pve1/lxc/9001/clone", "newid=300&full=1&storage=local-zfs", "clone failed: can't lock file '/var/lock/pve-manager/pve-storage-local-zfs' - got timeout"},
	} {
		ti, err := s.WaitTask(ctxT(t), cloneTask(t, s, c.path, c.body))
		if err != nil || ti.ExitStatus != c.want {
			t.Errorf("%s %s: %q %v, want %q", c.path, c.body, ti.ExitStatus, err, c.want)
		}
	}
	upid := cloneTask(t, s, "/nodes/pve2/qemu/9002/clone", "newid=202&full=1&storage=local-zfs")
	for _, ti := range s.Tasks() {
		if ti.UPID == upid && !ti.Running {
			t.Fatalf("pve2's clone waited for pve1's lock: %+v", ti)
		}
	}
}
