package pvesim

import (
	"strings"
	"testing"
)

// TestProtectedOps pins the pool a call takes a worker from to the API
// schema's "protected" flag (pve-docs 9.1.3 apidata.js; PVE::HTTPServer::
// rest_handler proxies protected handlers to pvedaemon).
func TestProtectedOps(t *testing.T) {
	s, err := New(Options{Nodes: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, pattern string
		node          string
		daemon        bool
	}{
		{"/api2/json/nodes/pve2/qemu/100/status/current", "GET /api2/json/nodes/{node}/qemu/{vmid}/status/current", "pve2", true},
		{"/api2/json/nodes/pve2/qemu/100/status/start", "POST /api2/json/nodes/{node}/qemu/{vmid}/status/start", "pve2", true},
		{"/api2/json/nodes/pve2/qemu/100/config", "PUT /api2/json/nodes/{node}/qemu/{vmid}/config", "pve2", true},
		{"/api2/json/nodes/pve2/qemu/100/config", "GET /api2/json/nodes/{node}/qemu/{vmid}/config", "pve2", false},
		{"/api2/json/nodes/pve2/lxc/100/clone", "POST /api2/json/nodes/{node}/lxc/{vmid}/clone", "pve2", true},
		{"/api2/json/cluster/resources", "GET /api2/json/cluster/resources", "pve1", false},
		{"/api2/json/cluster/ha/resources", "POST /api2/json/cluster/ha/resources", "pve1", true},
		{"/api2/json/nodes/nosuch/qemu", "GET /api2/json/nodes/{node}/qemu", "pve1", true},
		{"/api2/json/nodes/pve2/storage/local/content/local:iso/x.iso", "GET /api2/json/nodes/{node}/storage/{storage}/content/{volume...}", "pve2", true},
		{"/api2/json/nodes/pve2/qemu/100/agent/network-get-interfaces", "GET /api2/json/nodes/{node}/qemu/{vmid}/agent/{command}", "pve2", true},
		{"/api2/json/nodes/pve2/status", "GET /api2/json/nodes/{node}/status", "pve2", false},
		{"/api2/json/nowhere", "", "pve1", false},
	} {
		want := s.daemons[tc.node].proxy
		if tc.daemon {
			want = s.daemons[tc.node].daemon
		}
		method, _, _ := strings.Cut(tc.pattern, " ")
		if method == "" {
			method = "GET"
		}
		if got := s.poolFor(method, tc.path, tc.pattern); got != want {
			t.Errorf("%s %s: wrong pool (want %s, pvedaemon %v)", tc.pattern, tc.path, tc.node, tc.daemon)
		}
	}
}

// BenchmarkAPIWorkerPick is what the pools add to a call that finds a
// free worker: choosing the pool, taking and giving back a worker.
func BenchmarkAPIWorkerPick(b *testing.B) {
	s, err := New(Options{Nodes: 100})
	if err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p := s.poolFor("GET", "/api2/json/nodes/pve57/qemu/1234/status/current", "GET /api2/json/nodes/{node}/qemu/{vmid}/status/current")
			if p.acquire(ctx) {
				p.release()
			}
		}
	})
}
