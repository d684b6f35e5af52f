package pvesim_test

import (
	"strings"
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/converge-pve/converge/internal/pvesim"
)

// getJSON GETs path with the API token and returns the status line and the
// deterministic JSON of its data.
func getJSON(t *testing.T, s *pvesim.Sim, path string) (string, string, map[string]any) {
	t.Helper()
	res, body := form(t, s, "GET", path, "")
	b, _ := json.Marshal(body["data"], json.Deterministic(true))
	return res.Status, string(b), body
}

// TestStorageConfig: GET /storage and GET /storage/{storage} as
// pve-storage's src/PVE/API2/Storage/Config.pm "index" and "read" answer
// them ($api_storage_config: the storage.cfg section with storage, the
// file's digest and content encoded); the "type" filter and its
// enumeration are those of "GET /storage" in the API schema; an unknown
// storage is PVE::Storage::storage_config's 500.
func TestStorageConfig(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	c := tokenClient(s)
	all, err := c.ClusterStorages(ctxT(t))
	if err != nil || len(all) != 4 {
		t.Fatalf("go-proxmox ClusterStorages: %v %v", all, err)
	}
	lvm, err := c.ClusterStorage(ctxT(t), "local-lvm")
	if err != nil || lvm.Type != "lvmthin" || lvm.Thinpool != "data" || lvm.VgName != "pve" || lvm.Content != "images,rootdir" || len(lvm.Digest) != 40 {
		t.Fatalf("go-proxmox ClusterStorage: %+v %v", lvm, err)
	}
	st, got, _ := getJSON(t, s, "/storage/local")
	if st != "200 OK" || !strings.Contains(got, `"content":"backup,iso,snippets,vztmpl",`) || !strings.Contains(got, `"path":"/var/lib/vz","storage":"local","type":"dir"}`) {
		t.Fatalf("/storage/local: %s %s", st, got)
	}
	if st, got, _ := getJSON(t, s, "/storage?type=rbd"); st != "200 OK" || !strings.Contains(got, `"pool":"ceph","storage":"ceph","type":"rbd"}]`) || strings.Count(got, `"storage"`) != 1 {
		t.Fatalf("/storage?type=rbd: %s %s", st, got)
	}
	if st, got, _ := getJSON(t, s, "/storage?type=nfs"); st != "200 OK" || got != `[]` {
		t.Fatalf("/storage?type=nfs: %s %s", st, got)
	}
	for _, c := range []struct{ path, status, field string }{
		{"/storage/nope", "500 storage 'nope' does not exist", ""},
		{"/storage/n%21pe", "400 Parameter verification failed.", "storage"},
		{"/storage?type=disk", "400 Parameter verification failed.", "type"},
		{"/storage/local?x=1", "400 Parameter verification failed.", "x"},
	} {
		st, _, body := getJSON(t, s, c.path)
		if st != c.status {
			t.Fatalf("%s: %s, want %s", c.path, st, c.status)
		}
		if errs, _ := body["errors"].(map[string]any); c.field != "" && errs[c.field] == nil {
			t.Fatalf("%s: no error for %s: %v", c.path, c.field, body)
		}
	}
}

// TestNodeVersion: GET /nodes/{node}/version is pve-manager's
// PVE/API2/Nodes.pm "version" (PVE::pvecfg::version_info: version,
// release, repoid — the same as GET /version's), 500 for an unknown node.
func TestNodeVersion(t *testing.T) {
	s := startSim(t, pvesim.Options{Version: "9"})
	c := tokenClient(s)
	n, err := c.Node(ctxT(t), "pve1")
	if err != nil {
		t.Fatal(err)
	}
	v, err := n.Version(ctxT(t))
	if err != nil || v.Release != "9.2" || !strings.HasPrefix(v.Version, "9.2.") || v.RepoID == "" {
		t.Fatalf("go-proxmox Node.Version: %+v %v", v, err)
	}
	cv, err := c.Version(ctxT(t))
	if err != nil || *cv != *v {
		t.Fatalf("GET /version %+v, node's %+v (%v)", cv, v, err)
	}
	if st, _, _ := getJSON(t, s, "/nodes/nope/version"); st != "500 hostname lookup 'nope' failed - failed to get address info for: nope: Name or service not known" {
		t.Fatalf("unknown node: %s", st)
	}
}

// TestNodeNetwork: GET /nodes/{node}/network as pve-manager's
// PVE/API2/Network.pm "index" lists a default install's interfaces, read
// by pve-common's src/PVE/Network/Interfaces.pm (lo dropped, cidr from
// address and netmask, method6 manual, families [inet], bridge_stp off,
// bridge_fd "0"), sorted by name; the "type" enumeration is that of
// "GET /nodes/{node}/network" in the API schema (any_bridge matches
// bridges).
func TestNodeNetwork(t *testing.T) {
	s := startSim(t, pvesim.Options{Nodes: 2})
	c := tokenClient(s)
	n, err := c.Node(ctxT(t), "pve2")
	if err != nil {
		t.Fatal(err)
	}
	nets, err := n.Networks(ctxT(t))
	if err != nil || len(nets) != 2 || nets[0].Iface != "eno1" || nets[1].Iface != "vmbr0" || nets[1].BridgePorts != "eno1" {
		t.Fatalf("go-proxmox Networks: %+v %v", nets, err)
	}
	want := `[{"active":1,"address":"192.0.2.11","autostart":1,"bridge_fd":"0","bridge_ports":"eno1","bridge_stp":"off","cidr":"192.0.2.11/24","families":["inet"],"gateway":"192.0.2.1","iface":"vmbr0","method":"static","method6":"manual","netmask":"24","priority":4,"type":"bridge"}]`
	for _, typ := range []string{"bridge", "any_bridge"} {
		if st, got, _ := getJSON(t, s, "/nodes/pve2/network?type="+typ); st != "200 OK" || got != want {
			t.Fatalf("type=%s: %s\n got %s\nwant %s", typ, st, got, want)
		}
	}
	if _, got, _ := getJSON(t, s, "/nodes/pve1/network?type=eth"); got != `[{"active":1,"exists":1,"families":["inet"],"iface":"eno1","method":"manual","method6":"manual","priority":3,"type":"eth"}]` {
		t.Fatalf("type=eth: %s", got)
	}
	if _, got, _ := getJSON(t, s, "/nodes/pve1/network?type=bond"); got != `[]` {
		t.Fatalf("type=bond: %s", got)
	}
	if st, _, body := getJSON(t, s, "/nodes/pve1/network?type=wifi"); st != "400 Parameter verification failed." || body["errors"].(map[string]any)["type"] == nil {
		t.Fatalf("type=wifi: %s %v", st, body)
	}
	if st, _, _ := getJSON(t, s, "/nodes/nope/network"); !strings.HasPrefix(st, "500 hostname lookup 'nope' failed") {
		t.Fatalf("unknown node: %s", st)
	}
}
