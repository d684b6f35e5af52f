package pvesim_test

import (
	"strings"
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/converge-pve/converge/internal/pvesim"
)

// TestStorageContentList: GET /nodes/{node}/storage/{storage}/content, as
// pve-storage's src/PVE/API2/Storage/Content.pm "index" answers it through
// PVE::Storage::volume_list (src/PVE/Storage.pm: content types the storage
// holds, sorted by lower-cased volid) and the plugins' list_images
// (src/PVE/Storage/LvmThinPlugin.pm, RBDPlugin.pm: format raw, the owner
// vmid) with Plugin.pm's list_volumes content (rootdir for a container's
// volume). The "content" and "vmid" filters are those of
// "GET /nodes/{node}/storage/{storage}/content" in the API schema. It used
// to answer a 307 redirect to itself.
func TestStorageContentList(t *testing.T) {
	s := startSim(t, pvesim.Options{Nodes: 2})
	for _, g := range []pvesim.GuestSpec{
		{VMID: 100, Config: map[string]string{"scsi1": "ceph:vm-100-disk-1,size=10G", "unused0": "local-lvm:vm-100-disk-1"}},
		{VMID: 101, Kind: pvesim.LXC},
		{VMID: 102, Node: "pve2"},
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
	items, err := st.GetContent(ctxT(t))
	if err != nil {
		t.Fatalf("go-proxmox GetContent: %v", err)
	}
	if len(items) != 3 || items[0].Volid != "local-lvm:vm-100-disk-0" || items[0].Size != 32<<30 || items[0].Format != "raw" {
		t.Fatalf("go-proxmox GetContent: %+v", items)
	}

	list := func(path string) string {
		t.Helper()
		res, body := form(t, s, "GET", path, "")
		wantStatus(t, res, body, "200 OK")
		b, _ := json.Marshal(body["data"], json.Deterministic(true))
		return string(b)
	}
	// local-lvm is per node: pve1 holds 100's and 101's volumes, not 102's.
	want := `[{"content":"images","format":"raw","size":34359738368,"vmid":100,"volid":"local-lvm:vm-100-disk-0"},` +
		`{"content":"images","format":"raw","size":0,"vmid":100,"volid":"local-lvm:vm-100-disk-1"},` +
		`{"content":"rootdir","format":"raw","size":8589934592,"vmid":101,"volid":"local-lvm:vm-101-disk-0"}]`
	if got := list("/nodes/pve1/storage/local-lvm/content"); got != want {
		t.Fatalf("local-lvm on pve1:\n got %s\nwant %s", got, want)
	}
	if got := list("/nodes/pve1/storage/local-lvm/content?content=rootdir"); got != `[{"content":"rootdir","format":"raw","size":8589934592,"vmid":101,"volid":"local-lvm:vm-101-disk-0"}]` {
		t.Fatalf("content=rootdir: %s", got)
	}
	if got := list("/nodes/pve1/storage/local-lvm/content?vmid=101&content=images"); got != `[]` {
		t.Fatalf("vmid=101 content=images: %s", got)
	}
	if got := list("/nodes/pve2/storage/local-lvm/content?vmid=102"); got != `[{"content":"images","format":"raw","size":34359738368,"vmid":102,"volid":"local-lvm:vm-102-disk-0"}]` {
		t.Fatalf("local-lvm on pve2: %s", got)
	}
	// Ceph is shared: every node lists the same volumes.
	if a, b := list("/nodes/pve1/storage/ceph/content"), list("/nodes/pve2/storage/ceph/content"); a != b || a != `[{"content":"images","format":"raw","size":10737418240,"vmid":100,"volid":"ceph:vm-100-disk-1"}]` {
		t.Fatalf("ceph: pve1 %s, pve2 %s", a, b)
	}
	// "local" (dir) holds no images; its vztmpl content is empty until a
	// template is downloaded.
	if got := list("/nodes/pve1/storage/local/content"); got != `[]` {
		t.Fatalf("local: %s", got)
	}
	// A downloaded template is vztmpl content with Plugin.pm's
	// get_subdir_files format ("t" + the compression: tzst), listed only
	// without a vmid filter (list_volumes).
	res, body := form(t, s, "POST", "/nodes/pve1/aplinfo", "storage=local&template=alpine-3.20-default_20240908_amd64.tar.xz")
	wantStatus(t, res, body, "200 OK")
	upidOf(t, s, body)
	if got := list("/nodes/pve1/storage/local/content?content=vztmpl"); !strings.Contains(got, `"content":"vztmpl","format":"txz",`) || !strings.Contains(got, `"volid":"local:vztmpl/alpine-3.20-default_20240908_amd64.tar.xz"`) {
		t.Fatalf("local vztmpl: %s", got)
	}
	if got := list("/nodes/pve1/storage/local/content?vmid=100"); got != `[]` {
		t.Fatalf("local vmid=100: %s", got)
	}

	for _, c := range []struct{ path, status, field string }{
		{"/nodes/pve1/storage/nope/content", "500 storage 'nope' does not exist", ""},
		{"/nodes/nope/storage/local-lvm/content", "500 hostname lookup 'nope' failed - failed to get address info for: nope: Name or service not known", ""},
		{"/nodes/pve1/storage/local-lvm/content?content=disks", "400 Parameter verification failed.", "content"},
		{"/nodes/pve1/storage/local-lvm/content?vmid=99", "400 Parameter verification failed.", "vmid"},
		{"/nodes/pve1/storage/local-lvm/content?vmid=x", "400 Parameter verification failed.", "vmid"},
		{"/nodes/pve1/storage/local-lvm/content?bogus=1", "400 Parameter verification failed.", "bogus"},
	} {
		res, body := form(t, s, "GET", c.path, "")
		wantStatus(t, res, body, c.status)
		if c.field != "" {
			if errs, _ := body["errors"].(map[string]any); errs[c.field] == nil {
				t.Fatalf("%s: no error for %s: %v", c.path, c.field, body)
			}
		}
	}
}
