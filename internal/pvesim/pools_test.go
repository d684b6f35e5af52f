package pvesim_test

import (
	"reflect"
	"testing"

	"github.com/converge-pve/converge/internal/pvesim"
)

// resourcePool is the pool field of a guest's /cluster/resources row.
func resourcePool(t *testing.T, s *pvesim.Sim, vmid int) any {
	t.Helper()
	rows, err := callData(t, s, "GET", "/cluster/resources?type=vm", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows.([]any) {
		if m := r.(map[string]any); m["vmid"] == float64(vmid) {
			return m["pool"]
		}
	}
	t.Fatalf("no row for %d", vmid)
	return nil
}

// TestPools follows PVE/API2/Pool.pm: create, list, read with members
// (also as GET /pools?poolid= on PVE 8.1+), add and remove guests with
// PUT (allow-move to take one from another pool), delete only when
// empty; membership shows in /cluster/resources and ends with the guest.
func TestPools(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	for _, g := range []pvesim.GuestSpec{{VMID: 100, Name: "web1"}, {VMID: 101, Kind: pvesim.LXC}} {
		if err := s.AddGuest(g); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := callData(t, s, "POST", "/pools", map[string]any{"poolid": "web", "comment": "Web tier"}); err != nil {
		t.Fatal(err)
	}
	if _, err := callData(t, s, "POST", "/pools", map[string]any{"poolid": "db"}); err != nil {
		t.Fatal(err)
	}
	for id, msg := range map[string]string{
		"web":    "create pool failed: pool 'web' already exists",
		"1web":   "create pool failed: pool name must start with a letter",
		"x/y":    "create pool failed: parent 'x' of pool 'x/y' does not exist",
		"a b":    "400",
		"a/b/c/": "400",
	} {
		_, err := callData(t, s, "POST", "/pools", map[string]any{"poolid": id})
		errContains(t, err, msg)
	}
	list, _ := callData(t, s, "GET", "/pools", nil)
	want := []any{map[string]any{"poolid": "db"}, map[string]any{"poolid": "web", "comment": "Web tier"}}
	if !reflect.DeepEqual(list, want) {
		t.Fatalf("list %v", list)
	}
	if _, err := callData(t, s, "PUT", "/pools/web", map[string]any{"vms": "100,101", "storage": "ceph"}); err != nil {
		t.Fatal(err)
	}
	if p := resourcePool(t, s, 100); p != "web" {
		t.Fatalf("resources pool %v", p)
	}
	pool, err := callData(t, s, "GET", "/pools/web", nil)
	if err != nil {
		t.Fatal(err)
	}
	members := pool.(map[string]any)["members"].([]any)
	if len(members) != 3 || pool.(map[string]any)["comment"] != "Web tier" {
		t.Fatalf("pool %v", pool)
	}
	if m := members[0].(map[string]any); m["id"] != "qemu/100" || m["name"] != "web1" || m["status"] != "stopped" ||
		m["node"] != "pve1" || m["pool"] != nil {
		t.Fatalf("member %v", m)
	}
	if m := members[2].(map[string]any); m["id"] != "storage/pve1/ceph" || m["type"] != "storage" {
		t.Fatalf("storage member %v", m)
	}
	byParam, _ := callData(t, s, "GET", "/pools?poolid=web&type=lxc", nil)
	if l := byParam.([]any); len(l) != 1 || len(l[0].(map[string]any)["members"].([]any)) != 1 {
		t.Fatalf("GET /pools?poolid= %v", byParam)
	}
	for body, msg := range map[string]string{
		`{"vms":"100"}`:                  "update pools failed: VM 100 is already a pool member",
		`{"vms":"102","delete":1}`:       "update pools failed: VM 102 is not a pool member",
		`{"storage":"local","delete":1}`: "update pools failed: Storage 'local' is not a pool member",
		`{"vms":"abc"}`:                  "400",
	} {
		_, code := raw(t, "PUT", s.URL()+"/pools/web", map[string]string{"Authorization": tokenHdr()["Authorization"],
			"Content-Type": "application/json"}, body)
		if m, _ := code["message"].(string); m == "" || (msg != "400" && m != msg+"\n") {
			t.Errorf("PUT %s: %v, want %q", body, code, msg)
		}
	}
	_, err = callData(t, s, "PUT", "/pools/db", map[string]any{"vms": "100"})
	errContains(t, err, "update pools failed: VM 100 belongs already to pool 'web' and 'allow-move' is not set")
	if _, err := callData(t, s, "PUT", "/pools/db", map[string]any{"vms": "100", "allow-move": 1}); err != nil {
		t.Fatal(err)
	}
	if p := resourcePool(t, s, 100); p != "db" {
		t.Fatalf("after move %v", p)
	}
	_, err = callData(t, s, "DELETE", "/pools/db", nil)
	errContains(t, err, "delete pool failed: pool 'db' is not empty (contains VM 100)")
	if _, err := callData(t, s, "PUT", "/pools?poolid=db", map[string]any{"vms": "100", "delete": 1}); err != nil {
		t.Fatal(err)
	}
	if p := resourcePool(t, s, 100); p != nil {
		t.Fatalf("after removal %v", p)
	}
	if _, err := callData(t, s, "DELETE", "/pools/db", nil); err != nil {
		t.Fatal(err)
	}
	_, err = callData(t, s, "GET", "/pools/db", nil)
	errContains(t, err, "pool 'db' does not exist")
	// Destroying a member removes it from its pool (remove_vm_access).
	data, _ := callData(t, s, "DELETE", "/nodes/pve1/lxc/101", nil)
	waitUPID(t, s, data)
	if p, _ := s.Pool("web"); !reflect.DeepEqual(p.VMs, []int(nil)) || p.Storage[0] != "ceph" {
		t.Fatalf("web after destroy %+v", p)
	}
}

// TestPoolsPVE7: GET /pools takes no poolid before PVE 8.1, and a pool
// read has no poolid.
func TestPoolsPVE7(t *testing.T) {
	s := startSim(t, pvesim.Options{Version: "7", Pools: []string{"web"}})
	_, err := callData(t, s, "GET", "/pools?poolid=web", nil)
	errContains(t, err, "400")
	p, err := callData(t, s, "GET", "/pools/web", nil)
	if err != nil || p.(map[string]any)["poolid"] != nil {
		t.Fatalf("read %v %v", p, err)
	}
	_, err = callData(t, s, "PUT", "/pools?poolid=web", map[string]any{"vms": "100"})
	errContains(t, err, "501")
}
