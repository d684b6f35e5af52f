package pvesim_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/converge-pve/converge/internal/pvesim"
)

// configOf reads a guest's applied config over the API.
func configOf(t *testing.T, s *pvesim.Sim, kind string, vmid int) map[string]any {
	t.Helper()
	res, body := form(t, s, "GET", fmt.Sprintf("/nodes/pve1/%s/%d/config", kind, vmid), "")
	wantStatus(t, res, body, "200 OK")
	conf, _ := body["data"].(map[string]any)
	return conf
}

// TestDefaultPresentsPVE9: without Version the simulator is PVE 9 (PVE 8
// reached end of life in August 2026); 8 and 7 stay selectable.
func TestDefaultPresentsPVE9(t *testing.T) {
	for _, tc := range []struct{ version, release string }{{"", "9"}, {"9", "9"}, {"8", "8"}, {"7", "7"}} {
		s := startSim(t, pvesim.Options{Nodes: 1, Version: tc.version})
		res, body := form(t, s, "GET", "/version", "")
		wantStatus(t, res, body, "200 OK")
		data, _ := body["data"].(map[string]any)
		if rel, _ := data["release"].(string); !strings.HasPrefix(rel, tc.release+".") {
			t.Errorf("Version %q: release %q, want %s.x", tc.version, rel, tc.release)
		}
	}
}

// TestLXCCreateUnprivilegedDefault pins pve-container's API2/LXC.pm
// create_vm: `$conf->{unprivileged} = 1 if $unprivileged;` (an explicit 0
// writes nothing, every release) and, from pve-container 6.0.6 (PVE 9,
// commit 103068a "api: create: default to unprivileged containers"),
// `$unprivileged = 1 if !defined($unprivileged);` for a create that is not
// a restore. PVE 8 creates a privileged container when not asked.
func TestLXCCreateUnprivilegedDefault(t *testing.T) {
	const tmpl = "ostemplate=local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst"
	for _, tc := range []struct {
		version, param string
		want           any // nil: key absent
	}{
		{"9", "", float64(1)},
		{"9", "&unprivileged=0", nil},
		{"9", "&unprivileged=1", float64(1)},
		{"8", "", nil},
		{"8", "&unprivileged=0", nil},
		{"8", "&unprivileged=1", float64(1)},
	} {
		s := startSim(t, pvesim.Options{Nodes: 1, Version: tc.version})
		res, body := form(t, s, "POST", "/nodes/pve1/lxc", "vmid=300&"+tmpl+tc.param)
		wantStatus(t, res, body, "200 OK")
		upidOf(t, s, body)
		if got, ok := configOf(t, s, "lxc", 300)["unprivileged"]; got != tc.want || (tc.want == nil && ok) {
			t.Errorf("PVE %s, create%s: unprivileged %v, want %v", tc.version, tc.param, got, tc.want)
		}
	}
}

// TestLXCCloneKeepsUnprivileged: pve-container's clone_vm has no
// "unprivileged" parameter (the schema check refuses it) and copies every
// key it does not treat specially ("copy everything else"), so a clone is
// as privileged as its source, whatever the release's create default.
func TestLXCCloneKeepsUnprivileged(t *testing.T) {
	const tmpl = "ostemplate=local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst"
	s := startSim(t, pvesim.Options{Nodes: 1})
	for vmid, param := range map[int]string{300: "&unprivileged=0", 301: ""} {
		res, body := form(t, s, "POST", "/nodes/pve1/lxc", fmt.Sprintf("vmid=%d&%s%s", vmid, tmpl, param))
		wantStatus(t, res, body, "200 OK")
		upidOf(t, s, body)
		res, body = form(t, s, "POST", fmt.Sprintf("/nodes/pve1/lxc/%d/template", vmid), "")
		wantStatus(t, res, body, "200 OK")
		if up, _ := body["data"].(string); up != "" {
			upidOf(t, s, body)
		}
	}
	res, body := form(t, s, "POST", "/nodes/pve1/lxc/300/clone", "newid=400&unprivileged=1")
	wantStatus(t, res, body, "400 Parameter verification failed.")
	if errs, _ := body["errors"].(map[string]any); !strings.Contains(fmt.Sprint(errs["unprivileged"]), "property is not defined in schema") {
		t.Errorf("clone with unprivileged: errors %v", body["errors"])
	}
	for src, want := range map[int]any{300: nil, 301: float64(1)} {
		newid := src + 100
		res, body := form(t, s, "POST", fmt.Sprintf("/nodes/pve1/lxc/%d/clone", src), fmt.Sprintf("newid=%d", newid))
		wantStatus(t, res, body, "200 OK")
		upidOf(t, s, body)
		if got := configOf(t, s, "lxc", newid)["unprivileged"]; got != want {
			t.Errorf("clone of %d: unprivileged %v, want %v", src, got, want)
		}
	}
}

// TestHibernateStateKeys pins what qemu-server writes into the current
// config of a VM suspended to disk (RunState.pm vm_suspend with
// includestate → QemuConfig.pm __snapshot_save_vmstate): vmstate,
// runningmachine, runningcpu and, from qemu-server 9.0.20 (commit 7ceb6b72
// "snapshot: introduce running-nets-host-mtu property"),
// running-nets-host-mtu: Network.pm get_nets_host_mtu, "netN=<host_mtu>"
// for the virtio NICs in sorted key order (host_mtu: the NIC's mtu, else the
// bridge's, always set for machine ≥ 10.0+pve1; print_netdevice_full).
// A running VM's config carries none of them, and starting (resuming)
// removes them all (QemuServer.pm vm_start_nolock). A RAM snapshot
// (vmstate=1) carries running-nets-host-mtu too.
func TestHibernateStateKeys(t *testing.T) {
	for _, version := range []string{"8", "9"} {
		s := startSim(t, pvesim.Options{Nodes: 1, Version: version})
		if err := s.AddGuest(pvesim.GuestSpec{VMID: 100, Running: true, Config: map[string]string{
			"net1": "e1000=BC:24:11:00:00:01,bridge=vmbr0",
			"net2": "virtio=BC:24:11:00:00:02,bridge=vmbr0,mtu=1400",
		}}); err != nil {
			t.Fatal(err)
		}
		conf := configOf(t, s, "qemu", 100)
		for _, k := range []string{"vmstate", "runningmachine", "runningcpu", "running-nets-host-mtu"} {
			if v, ok := conf[k]; ok {
				t.Errorf("PVE %s: running VM's config has %s=%v", version, k, v)
			}
		}
		res, body := form(t, s, "POST", "/nodes/pve1/qemu/100/snapshot", "snapname=ram&vmstate=1")
		wantStatus(t, res, body, "200 OK")
		upidOf(t, s, body)
		res, body = form(t, s, "POST", "/nodes/pve1/qemu/100/status/suspend", "todisk=1")
		wantStatus(t, res, body, "200 OK")
		upidOf(t, s, body)
		conf = configOf(t, s, "qemu", 100)
		if vs, _ := conf["vmstate"].(string); !strings.HasPrefix(vs, "local-lvm:vm-100-state-suspend-") {
			t.Errorf("PVE %s: hibernated vmstate %q", version, vs)
		}
		if conf["lock"] != "suspended" || conf["runningmachine"] == nil || conf["runningcpu"] == nil {
			t.Errorf("PVE %s: hibernated config %v", version, conf)
		}
		mtu, has := conf["running-nets-host-mtu"]
		wantMTU := "net0=1500,net2=1400"
		if version == "9" && mtu != wantMTU || version == "8" && has {
			t.Errorf("PVE %s: running-nets-host-mtu %v (present %v), want %q on 9 only", version, mtu, has, wantMTU)
		}
		sn := s.Snapshots(100)
		if got, has := sn[0].Config["running-nets-host-mtu"]; version == "9" && got != wantMTU || version == "8" && has {
			t.Errorf("PVE %s: RAM snapshot running-nets-host-mtu %q (present %v)", version, got, has)
		}
		res, body = form(t, s, "POST", "/nodes/pve1/qemu/100/status/resume", "")
		wantStatus(t, res, body, "200 OK")
		upidOf(t, s, body)
		conf = configOf(t, s, "qemu", 100)
		for _, k := range []string{"lock", "vmstate", "runningmachine", "runningcpu", "running-nets-host-mtu"} {
			if v, ok := conf[k]; ok {
				t.Errorf("PVE %s: resumed VM's config keeps %s=%v", version, k, v)
			}
		}
	}
}

// TestRunningNetsHostMTURefused: qemu-server's json_config_properties
// leaves running-nets-host-mtu (like vmstate, runningmachine, runningcpu)
// out of the create and update schemas (commit f1fe3b74 "api:
// create/update: disallow setting 'running-nets-host-mtu' via API"), so
// the schema check refuses it as an undeclared parameter.
func TestRunningNetsHostMTURefused(t *testing.T) {
	s := startSim(t, pvesim.Options{Nodes: 1, Guests: 2})
	for _, tc := range []struct{ method, path, body string }{
		{"PUT", "/nodes/pve1/qemu/100/config", "running-nets-host-mtu=net0%3D1500"},
		{"POST", "/nodes/pve1/qemu/100/config", "running-nets-host-mtu=net0%3D1500"},
		{"POST", "/nodes/pve1/qemu", "vmid=500&running-nets-host-mtu=net0%3D1500"},
	} {
		res, body := form(t, s, tc.method, tc.path, tc.body)
		wantStatus(t, res, body, "400 Parameter verification failed.")
		errs, _ := body["errors"].(map[string]any)
		if msg := fmt.Sprint(errs["running-nets-host-mtu"]); !strings.Contains(msg, "property is not defined in schema") {
			t.Errorf("%s %s: errors %v", tc.method, tc.path, errs)
		}
	}
}

// TestContentSizesOnPVE9: pve-storage 9.1.5 (commit 7ce747e "api/cli: list
// content: declare size optional and add approximate-size", used by
// 225a872 "fix #6819") answers approximate-size instead of size only in
// LVMPlugin.pm list_images, for qcow2 volumes on an inactive LV of a
// (thick) LVM storage. The simulator's storages are dir, lvmthin and rbd
// with raw volumes, whose entries keep size on PVE 9.
func TestContentSizesOnPVE9(t *testing.T) {
	s := startSim(t, pvesim.Options{Nodes: 1, Guests: 3, DemoTemplates: true})
	for _, st := range []string{"local", "local-lvm", "ceph"} {
		res, body := form(t, s, "GET", "/nodes/pve1/storage/"+st+"/content", "")
		wantStatus(t, res, body, "200 OK")
		list, _ := body["data"].([]any)
		for _, e := range list {
			m, _ := e.(map[string]any)
			if _, ok := m["size"]; !ok {
				t.Errorf("%s: entry without size: %v", st, m)
			}
			if _, ok := m["approximate-size"]; ok {
				t.Errorf("%s: entry with approximate-size: %v", st, m)
			}
		}
		if st == "local-lvm" && len(list) == 0 {
			t.Errorf("local-lvm lists nothing")
		}
	}
}

// TestDiscardHibernation: qemu-server's update_vm_api lets a write that
// deletes vmstate through a 'suspended' lock and deletes the lock,
// runningmachine, runningcpu and running-nets-host-mtu with it (API2/Qemu.pm
// $load_and_check_config: "'suspended' lock should probably be a state or
// \"weak\" lock"); the VM then starts afresh. Any other write is refused by
// the lock.
func TestDiscardHibernation(t *testing.T) {
	s := startSim(t, pvesim.Options{Nodes: 1})
	if err := s.AddGuest(pvesim.GuestSpec{VMID: 100, Running: true}); err != nil {
		t.Fatal(err)
	}
	res, body := form(t, s, "POST", "/nodes/pve1/qemu/100/status/suspend", "todisk=1")
	wantStatus(t, res, body, "200 OK")
	upidOf(t, s, body)
	res, body = form(t, s, "PUT", "/nodes/pve1/qemu/100/config", "cores=2")
	wantStatus(t, res, body, "500 VM is locked (suspended)")
	res, body = form(t, s, "PUT", "/nodes/pve1/qemu/100/config", "delete=vmstate")
	wantStatus(t, res, body, "200 OK")
	conf := configOf(t, s, "qemu", 100)
	for _, k := range []string{"lock", "vmstate", "runningmachine", "runningcpu", "running-nets-host-mtu"} {
		if v, ok := conf[k]; ok {
			t.Errorf("after delete=vmstate the config keeps %s=%v", k, v)
		}
	}
	res, body = form(t, s, "POST", "/nodes/pve1/qemu/100/status/start", "")
	wantStatus(t, res, body, "200 OK")
	upidOf(t, s, body)
	if g, _ := s.Guest(100); g.Status != "running" || g.Lock != "" {
		t.Fatalf("started after the state was discarded: %+v", g)
	}
}
