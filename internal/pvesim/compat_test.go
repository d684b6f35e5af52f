package pvesim_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/converge-pve/converge/internal/pvesim"
)

// form sends a form-encoded request with the API token, as curl -d or
// proxmoxer do, and returns the response and its decoded body.
func form(t *testing.T, s *pvesim.Sim, method, path, body string) (*http.Response, map[string]any) {
	t.Helper()
	hdr := tokenHdr()
	if body != "" {
		hdr["Content-Type"] = "application/x-www-form-urlencoded"
	}
	return raw(t, method, s.URL()+path, hdr, body)
}

func wantStatus(t *testing.T, res *http.Response, body map[string]any, want string) {
	t.Helper()
	if res.Status != want {
		t.Fatalf("status %q, want %q (body %v)", res.Status, want, body)
	}
}

// upidOf waits for the task a response returned and returns its UPID.
func upidOf(t *testing.T, s *pvesim.Sim, body map[string]any) string {
	t.Helper()
	upid, _ := body["data"].(string)
	if !strings.HasPrefix(upid, "UPID:") {
		t.Fatalf("no UPID: %v", body)
	}
	ti, err := s.WaitTask(ctxT(t), upid)
	if err != nil || ti.ExitStatus != "OK" {
		t.Fatalf("task %s: %+v %v", upid, ti, err)
	}
	return upid
}

// TestVolumeInfo: GET /nodes/{node}/storage/{storage}/content/{volume}, as
// pve-storage's Content.pm info answers it (bpg reads it for every QEMU
// disk without format=).
func TestVolumeInfo(t *testing.T) {
	s := startSim(t, pvesim.Options{Nodes: 2})
	if err := s.AddGuest(pvesim.GuestSpec{VMID: 100, Config: map[string]string{"scsi1": "ceph:vm-100-disk-0,iothread=1,size=10G"}}); err != nil {
		t.Fatal(err)
	}
	res, body := form(t, s, "GET", "/nodes/pve1/storage/local-lvm/content/local-lvm:vm-100-disk-0", "")
	wantStatus(t, res, body, "200 OK")
	got, _ := json.Marshal(body["data"], json.Deterministic(true))
	if string(got) != `{"format":"raw","path":"/dev/pve/vm-100-disk-0","size":34359738368,"used":0}` {
		t.Fatalf("lvmthin volume: %s", got)
	}
	// The volume id URL-encoded, the storage given only by the path.
	res, body = form(t, s, "GET", "/nodes/pve2/storage/ceph/content/vm-100-disk-0", "")
	wantStatus(t, res, body, "200 OK")
	if d := body["data"].(map[string]any); d["path"] != "rbd:ceph/vm-100-disk-0:conf=/etc/pve/ceph.conf" || d["size"] != float64(10737418240) {
		t.Fatalf("rbd volume: %v", d)
	}
	for _, c := range []struct{ path, status string }{
		// local-lvm is per node: the disk of a guest on pve1 is not on pve2's.
		{"/nodes/pve2/storage/local-lvm/content/local-lvm%3Avm-100-disk-0", `500 can't get size of '/dev/pve/vm-100-disk-0':   Failed to find logical volume "pve/vm-100-disk-0"`},
		{"/nodes/pve1/storage/ceph/content/ceph:vm-999-disk-0", "500 rbd error: rbd: error opening image vm-999-disk-0: (2) No such file or directory"},
		{"/nodes/pve1/storage/ceph/content/local-lvm:vm-100-disk-0", "400 Parameter verification failed."},
		{"/nodes/pve1/storage/local/content/local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst", "500 volume_size_info on 'local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst' failed - no format"},
		{"/nodes/pve1/storage/nope/content/nope:vm-100-disk-0", "500 storage 'nope' does not exist"},
		// check_volume_access runs Plugin.pm parse_volname before
		// volume_size_info: a dir volume name without its content type's
		// extension ($ISO_EXT_RE_0, $VZTMPL_EXT_RE_1, $BACKUP_EXT_RE_2) or
		// an image name parse_name_dir cannot read is refused as such; a
		// well-formed name that is not there has "no format".
		{"/nodes/pve1/storage/local/content/local:iso/doesnt-exist", "500 unable to parse directory volume name 'iso/doesnt-exist'"},
		{"/nodes/pve1/storage/local/content/local:vztmpl/doesnt-exist", "500 unable to parse directory volume name 'vztmpl/doesnt-exist'"},
		{"/nodes/pve1/storage/local/content/local:vztmpl/x.tar.gz.part", "500 unable to parse directory volume name 'vztmpl/x.tar.gz.part'"},
		{"/nodes/pve1/storage/local/content/local:backup/x.txt", "500 unable to parse directory volume name 'backup/x.txt'"},
		{"/nodes/pve1/storage/local/content/local:iso/a/b.iso", "500 unable to parse directory volume name 'iso/a/b.iso'"},
		{"/nodes/pve1/storage/local/content/local:100/disk.img", "500 unable to parse volume filename 'disk.img'"},
		{"/nodes/pve1/storage/local/content/local:iso/x.iso", "500 volume_size_info on 'local:iso/x.iso' failed - no format"},
		{"/nodes/pve1/storage/local/content/local:iso/X.IMG", "500 volume_size_info on 'local:iso/X.IMG' failed - no format"},
		{"/nodes/pve1/storage/local/content/iso/x.tar.zst", "500 unable to parse directory volume name 'iso/x.tar.zst'"},
		{"/nodes/pve1/storage/local/content/vztmpl/x.tar", "500 volume_size_info on 'local:vztmpl/x.tar' failed - no format"},
	} {
		res, body := form(t, s, "GET", c.path, "")
		wantStatus(t, res, body, c.status)
	}
}

// TestVolumeInfoDownloadedISO: Content.pm info of an ISO image that
// pve-storage's API2/Storage/Status.pm download_url put on a directory
// storage: its path under template/iso (Plugin.pm filesystem_path), and
// size, used and format from Plugin.pm volume_size_info, which passes
// file_size_info the format parse_volname gives an ISO, "raw" (the
// listing says "iso": list_volumes). Once deleted, it has "no format".
// go-proxmox's Storage.ISO reads it so.
func TestVolumeInfoDownloadedISO(t *testing.T) {
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
	task, err := st.DownloadURL(ctxT(t), "iso", "tiny.iso", "https://example.org/tiny.iso")
	mustOK(t, s, task, err)
	items, err := st.GetContent(ctxT(t))
	if err != nil || len(items) != 1 {
		t.Fatalf("content %+v %v", items, err)
	}
	res, body := form(t, s, "GET", "/nodes/pve1/storage/local/content/local:iso/tiny.iso", "")
	wantStatus(t, res, body, "200 OK")
	got, _ := json.Marshal(body["data"], json.Deterministic(true))
	size := uint64(items[0].Size)
	want := fmt.Sprintf(`{"format":"raw","path":"/var/lib/vz/template/iso/tiny.iso","size":%d,"used":%d}`, size, size)
	if string(got) != want {
		t.Fatalf("info %s, want %s", got, want)
	}
	iso, err := st.ISO(ctxT(t), "tiny.iso")
	if err != nil || iso.Path != "/var/lib/vz/template/iso/tiny.iso" || iso.Format != "raw" {
		t.Fatalf("go-proxmox ISO: %+v %v", iso, err)
	}
	task, err = iso.Delete(ctxT(t))
	mustOK(t, s, task, err)
	res, body = form(t, s, "GET", "/nodes/pve1/storage/local/content/local:iso/tiny.iso", "")
	wantStatus(t, res, body, "500 volume_size_info on 'local:iso/tiny.iso' failed - no format")
}

// TestPathNormalisation: pve-http-server splits the path on /+ and skips
// empty fragments, so a trailing or doubled slash is the same path; the
// mutation is received (and counted) once.
func TestPathNormalisation(t *testing.T) {
	s := startSim(t, pvesim.Options{DemoTemplates: true})
	if err := s.AddGuest(pvesim.GuestSpec{VMID: 600}); err != nil {
		t.Fatal(err)
	}
	before := s.Mutations()
	res, body := form(t, s, "DELETE", "/nodes/pve1/qemu/600/?purge=1", "")
	wantStatus(t, res, body, "200 OK")
	upidOf(t, s, body)
	if _, ok := s.Guest(600); ok {
		t.Fatal("guest 600 not destroyed")
	}
	res, body = form(t, s, "POST", "/nodes/pve1/lxc/9001//clone", "newid=601&hostname=ct601")
	wantStatus(t, res, body, "200 OK")
	upidOf(t, s, body)
	if n := s.Mutations() - before; n != 2 {
		t.Fatalf("%d mutations received for 2 calls", n)
	}
	if g, ok := s.Guest(601); !ok || g.Config["hostname"] != "ct601" {
		t.Fatalf("clone: %+v", g)
	}
	res, body = form(t, s, "GET", "//nodes//pve1/qemu/", "")
	wantStatus(t, res, body, "200 OK")
}

// TestLXCInterfaces: pve-container's GET …/interfaces (PVE::LXC::
// get_interfaces): lo and each netN of a running container, null when it
// is not running.
func TestLXCInterfaces(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	if err := s.AddGuest(pvesim.GuestSpec{VMID: 200, Kind: pvesim.LXC, Running: true, Config: map[string]string{
		"net0": "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:0A:0B:0C,ip=dhcp,type=veth",
		"net1": "name=eth1,bridge=vmbr1,hwaddr=BC:24:11:01:02:03,ip=192.168.5.7/24,ip6=fd00::7/64,type=veth",
	}}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddGuest(pvesim.GuestSpec{VMID: 201, Kind: pvesim.LXC}); err != nil {
		t.Fatal(err)
	}
	res, body := form(t, s, "GET", "/nodes/pve1/lxc/200/interfaces", "")
	wantStatus(t, res, body, "200 OK")
	list := body["data"].([]any)
	if len(list) != 3 {
		t.Fatalf("interfaces: %v", list)
	}
	lo, eth0, eth1 := list[0].(map[string]any), list[1].(map[string]any), list[2].(map[string]any)
	if lo["name"] != "lo" || lo["inet"] != "127.0.0.1/8" || lo["inet6"] != "::1/128" || lo["hwaddr"] != "00:00:00:00:00:00" {
		t.Fatalf("lo: %v", lo)
	}
	if eth0["name"] != "eth0" || eth0["hwaddr"] != "bc:24:11:0a:0b:0c" || eth0["hardware-address"] != "bc:24:11:0a:0b:0c" ||
		eth0["inet"] != "10.10.11.12/24" || eth0["inet6"] != "fe80::be24:11ff:fe0a:b0c/64" {
		t.Fatalf("eth0: %v", eth0)
	}
	if eth1["inet"] != "192.168.5.7/24" || len(eth1["ip-addresses"].([]any)) != 3 {
		t.Fatalf("eth1: %v", eth1)
	}
	for _, p := range []string{"/nodes/pve1/lxc/201/interfaces", "/nodes/pve1/lxc/999/interfaces"} {
		res, body = form(t, s, "GET", p, "")
		wantStatus(t, res, body, "200 OK")
		if v, ok := body["data"]; !ok || v != nil {
			t.Fatalf("%s: %v", p, body)
		}
	}
}

var macRe = `BC:24:11(:[0-9A-F]{2}){3}`

// TestNICCanonical: a NIC without a MAC gets one (BC:24:11) and is stored
// in Proxmox's canonical form (qemu-server print_net, pve-container
// print_lxc_network); a given MAC is kept.
func TestNICCanonical(t *testing.T) {
	s := startSim(t, pvesim.Options{Seed: 7})
	res, body := form(t, s, "POST", "/nodes/pve1/qemu", "vmid=300&net0=model%3Dvirtio%2Cbridge%3Dvmbr0&net1=e1000%3DAA:BB:CC:DD:EE:F0,firewall%3D1,bridge%3Dvmbr1")
	wantStatus(t, res, body, "200 OK")
	upidOf(t, s, body)
	g, _ := s.Guest(300)
	if !regexp.MustCompile(`^virtio=` + macRe + `,bridge=vmbr0$`).MatchString(g.Config["net0"]) {
		t.Fatalf("net0 = %q", g.Config["net0"])
	}
	if g.Config["net1"] != "e1000=AA:BB:CC:DD:EE:F0,bridge=vmbr1,firewall=1" {
		t.Fatalf("net1 = %q", g.Config["net1"])
	}
	res, body = form(t, s, "PUT", "/nodes/pve1/qemu/300/config", "net2=bridge%3Dvmbr0,model%3Dvmxnet3,tag%3D5")
	wantStatus(t, res, body, "200 OK")
	if g, _ = s.Guest(300); !regexp.MustCompile(`^vmxnet3=` + macRe + `,bridge=vmbr0,tag=5$`).MatchString(g.Config["net2"]) {
		t.Fatalf("net2 = %q", g.Config["net2"])
	}

	res, body = form(t, s, "POST", "/nodes/pve1/lxc", "vmid=301&ostemplate=local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst&net0=name%3Deth0,bridge%3Dvmbr0")
	wantStatus(t, res, body, "200 OK")
	upidOf(t, s, body)
	res, body = form(t, s, "PUT", "/nodes/pve1/lxc/301/config", "net1=name%3Deth1,ip%3Ddhcp,bridge%3Dvmbr0,hwaddr%3DBC:24:11:AA:BB:CC")
	wantStatus(t, res, body, "200 OK")
	g, _ = s.Guest(301)
	if !regexp.MustCompile(`^name=eth0,bridge=vmbr0,hwaddr=` + macRe + `,type=veth$`).MatchString(g.Config["net0"]) {
		t.Fatalf("lxc net0 = %q", g.Config["net0"])
	}
	if g.Config["net1"] != "name=eth1,bridge=vmbr0,hwaddr=BC:24:11:AA:BB:CC,ip=dhcp,type=veth" {
		t.Fatalf("lxc net1 = %q", g.Config["net1"])
	}
}

// TestRepeatedFormKeys: a repeated key becomes an array in pve-http-server;
// "-list" parameters (delete, revert, tags, …) are joined with ',', any
// other is refused by the schema check.
func TestRepeatedFormKeys(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	if err := s.AddGuest(pvesim.GuestSpec{VMID: 100, OnBoot: true, Description: "x"}); err != nil {
		t.Fatal(err)
	}
	res, body := form(t, s, "PUT", "/nodes/pve1/qemu/100/config", "delete=description&delete=onboot&tags=b&tags=a")
	wantStatus(t, res, body, "200 OK")
	g, _ := s.Guest(100)
	if _, ok := g.Config["description"]; ok || g.Config["onboot"] != "" || g.Config["tags"] != "a;b" {
		t.Fatalf("config: %v", g.Config)
	}
	res, body = form(t, s, "PUT", "/nodes/pve1/qemu/100/config", "cores=1&cores=2")
	wantStatus(t, res, body, "400 Parameter verification failed.")
	if e := body["errors"].(map[string]any); e["cores"] != "type check ('integer') failed - got ARRAY\n" {
		t.Fatalf("errors: %v", e)
	}
	hdr := tokenHdr()
	hdr["Content-Type"] = "application/json"
	res, body = raw(t, "PUT", s.URL()+"/nodes/pve1/qemu/100/config", hdr, `{"delete":["cores","memory"]}`)
	wantStatus(t, res, body, "200 OK")
	if g, _ = s.Guest(100); g.Config["cores"] != "" || g.Config["memory"] != "" {
		t.Fatalf("JSON array delete: %v", g.Config)
	}
}

// TestDiskAllocation: "STORAGE:SIZE" (also as file=) allocates a new
// volume vm-N-disk-K (lowest K free on that storage) of SIZE GiB, printed
// as qemu-server's print_drive; a container without rootfs gets 4 GiB.
func TestDiskAllocation(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	res, body := form(t, s, "POST", "/nodes/pve1/qemu", "vmid=400&scsi0=local-lvm:8,iothread%3D1&virtio0=file%3Dceph:0.5,size%3D99G,format%3Draw")
	wantStatus(t, res, body, "200 OK")
	upidOf(t, s, body)
	g, _ := s.Guest(400)
	if g.Config["scsi0"] != "local-lvm:vm-400-disk-0,iothread=1,size=8G" || g.Config["virtio0"] != "ceph:vm-400-disk-0,size=512M" {
		t.Fatalf("create: %v", g.Config)
	}
	res, body = form(t, s, "PUT", "/nodes/pve1/qemu/400/config", "scsi1=file%3Dlocal-lvm:2,size%3D2G")
	wantStatus(t, res, body, "200 OK")
	if g, _ = s.Guest(400); g.Config["scsi1"] != "local-lvm:vm-400-disk-1,size=2G" {
		t.Fatalf("config write: %v", g.Config)
	}
	res, body = form(t, s, "PUT", "/nodes/pve1/qemu/400/config", "scsi2=nosuch:2")
	wantStatus(t, res, body, "500 storage 'nosuch' does not exist")
	res, body = form(t, s, "GET", "/nodes/pve1/storage/local-lvm/content/local-lvm:vm-400-disk-1", "")
	wantStatus(t, res, body, "200 OK")

	res, body = form(t, s, "POST", "/nodes/pve1/lxc", "vmid=401&ostemplate=local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst&mp0=ceph:3,mp%3D/srv")
	wantStatus(t, res, body, "200 OK")
	upidOf(t, s, body)
	g, _ = s.Guest(401)
	if g.Config["rootfs"] != "local-lvm:vm-401-disk-0,size=4G" || g.Config["mp0"] != "ceph:vm-401-disk-0,mp=/srv,size=3G" {
		t.Fatalf("lxc create: %v", g.Config)
	}
}

// TestAplDownload: POST /nodes/{node}/aplinfo as pve-manager's
// apl_download: 400 for a template not in the index, else a download task
// whose template then exists in the storage's vztmpl content.
func TestAplDownload(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	res, body := form(t, s, "POST", "/nodes/pve1/aplinfo", "storage=local&template=nope.tar.zst")
	wantStatus(t, res, body, "400 Parameter verification failed.")
	if e := body["errors"].(map[string]any); e["template"] != "no such template\n" {
		t.Fatalf("errors: %v", e)
	}
	const tmpl = "alpine-3.20-default_20240908_amd64.tar.xz"
	res, body = form(t, s, "POST", "/nodes/pve1/aplinfo", "storage=local-lvm&template="+tmpl)
	wantStatus(t, res, body, "500 storage 'local-lvm' does not support templates")
	res, body = form(t, s, "POST", "/nodes/pve1/aplinfo", "storage=local&template="+tmpl)
	wantStatus(t, res, body, "200 OK")
	upid := upidOf(t, s, body)
	if !strings.Contains(upid, ":download:"+tmpl+":root@pam!") {
		t.Fatalf("upid %s", upid)
	}
	res, body = form(t, s, "GET", "/nodes/pve1/storage/local/content/local:vztmpl/"+tmpl, "")
	wantStatus(t, res, body, "200 OK")
	if d := body["data"].(map[string]any); d["path"] != "/var/lib/vz/template/cache/"+tmpl || d["format"] != "raw" {
		t.Fatalf("template volume: %v", d)
	}
}

// TestPendingEqualDropped: qemu-server's update ends with
// PVE::AbstractConfig::cleanup_pending, which drops a pending value equal
// (as stored, i.e. after print_net) to the current one: a NIC re-sent in
// bpg's form with its MAC on a VM without network hotplug leaves nothing
// pending.
func TestPendingEqualDropped(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	if err := s.AddGuest(pvesim.GuestSpec{VMID: 100, Running: true, Config: map[string]string{
		"hotplug": "disk", "net0": "virtio=BC:24:11:12:34:56,bridge=vmbr0,firewall=1"}}); err != nil {
		t.Fatal(err)
	}
	res, body := form(t, s, "PUT", "/nodes/pve1/qemu/100/config", "net0=model%3Dvirtio,bridge%3Dvmbr0,firewall%3D1,macaddr%3DBC:24:11:12:34:56")
	wantStatus(t, res, body, "200 OK")
	res, body = form(t, s, "GET", "/nodes/pve1/qemu/100/pending", "")
	wantStatus(t, res, body, "200 OK")
	for _, e := range body["data"].([]any) {
		if _, ok := e.(map[string]any)["pending"]; ok {
			t.Fatalf("pending left: %v", e)
		}
	}
	res, body = form(t, s, "PUT", "/nodes/pve1/qemu/100/config", "net0=model%3Dvirtio,bridge%3Dvmbr1,macaddr%3DBC:24:11:12:34:56")
	wantStatus(t, res, body, "200 OK")
	if g, _ := s.Guest(100); g.Pending["net0"] != "virtio=BC:24:11:12:34:56,bridge=vmbr1" {
		t.Fatalf("a change stays pending: %+v", g)
	}
}
