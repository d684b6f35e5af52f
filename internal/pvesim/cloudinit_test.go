package pvesim_test

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/converge-pve/converge/internal/pvesim"
)

// TestCloudInit follows qemu-server: a config write allocates
// "local-lvm:cloudinit" as vm-<id>-cloudinit (one per VM) and generates
// it; sshkeys stay URL-encoded; a start regenerates the drive; live
// changes on a running VM are listed by GET …/cloudinit until PUT
// …/cloudinit regenerates the drive (a null answer, in the mutation log).
func TestCloudInit(t *testing.T) {
	var mu sync.Mutex
	var puts []string
	s := startSim(t, pvesim.Options{OnMutation: func(m pvesim.Mutation) {
		mu.Lock()
		defer mu.Unlock()
		puts = append(puts, m.Method+" "+m.Path)
	}})
	for _, id := range []int{100, 101} {
		if err := s.AddGuest(pvesim.GuestSpec{VMID: id, Name: fmt.Sprintf("vm%d", id)}); err != nil {
			t.Fatal(err)
		}
	}
	path := "/nodes/pve1/qemu/100"
	keys := "ssh-ed25519%20AAAAC3Nza%20alice%40example"
	if _, err := callData(t, s, "PUT", path+"/config", map[string]any{"ide2": "local-lvm:cloudinit",
		"ciuser": "alice", "sshkeys": keys, "ipconfig0": "ip=dhcp", "ciupgrade": 0}); err != nil {
		t.Fatal(err)
	}
	g, _ := s.Guest(100)
	if g.Config["ide2"] != "local-lvm:vm-100-cloudinit,media=cdrom" || g.Config["sshkeys"] != keys || g.Config["ciupgrade"] != "0" {
		t.Fatalf("config %v", g.Config)
	}
	if ci, _ := s.CloudInit(100); ci.Drive != "ide2" || ci.Generations != 1 || ci.Values["ciuser"] != "alice" {
		t.Fatalf("cloud-init %+v", ci)
	}
	_, err := callData(t, s, "PUT", path+"/config", map[string]any{"ide3": "local-lvm:cloudinit"})
	errContains(t, err, "ide3 - cloud-init drive is already attached at 'ide2'")
	_, err = callData(t, s, "PUT", path+"/config", map[string]any{"sshkeys": "ssh-ed25519 AAAA"})
	errContains(t, err, "400")
	data, _ := callData(t, s, "POST", path+"/status/start", nil)
	waitUPID(t, s, data)
	if ci, _ := s.CloudInit(100); ci.Generations != 2 {
		t.Fatalf("generations after start %d", ci.Generations)
	}
	// Live changes of a running VM are recorded in [special:cloudinit].
	if _, err := callData(t, s, "PUT", path+"/config", map[string]any{"ciuser": "bob", "nameserver": "192.0.2.53",
		"cipassword": "secret", "delete": "ipconfig0"}); err != nil {
		t.Fatal(err)
	}
	got, err := callData(t, s, "GET", path+"/cloudinit", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []any{
		map[string]any{"key": "cipassword", "pending": "**********"},
		map[string]any{"key": "nameserver", "pending": "192.0.2.53"},
		map[string]any{"key": "ciuser", "value": "alice", "pending": "bob"},
		map[string]any{"key": "sshkeys", "value": keys},
		map[string]any{"key": "ipconfig0", "delete": float64(1)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("GET cloudinit\n got %v\nwant %v", got, want)
	}
	before, _ := s.Guest(100)
	if data, err := callData(t, s, "PUT", path+"/cloudinit", nil); err != nil || data != nil {
		t.Fatalf("PUT cloudinit %v %v", data, err)
	}
	ci, _ := s.CloudInit(100)
	if ci.Generations != 3 || ci.Values["ciuser"] != "bob" || len(ci.Changed) != 0 {
		t.Fatalf("after regeneration %+v", ci)
	}
	if g, _ := s.Guest(100); g.Digest == before.Digest {
		t.Fatal("dropping [special:cloudinit] kept the digest")
	}
	got, _ = callData(t, s, "GET", path+"/cloudinit", nil)
	if len(got.([]any)) != 4 || !reflect.DeepEqual(got.([]any)[1], map[string]any{"key": "ciuser", "value": "bob"}) {
		t.Fatalf("after regeneration %v", got)
	}
	mu.Lock()
	logged := strings.Join(puts, "\n")
	mu.Unlock()
	if !strings.Contains(logged, "PUT /api2/json/nodes/pve1/qemu/100/cloudinit") {
		t.Fatalf("mutation log %s", logged)
	}
	dump, err := callData(t, s, "GET", path+"/cloudinit/dump?type=user", nil)
	if err != nil || !strings.Contains(dump.(string), "hostname: vm100\n") || !strings.Contains(dump.(string), "user: bob\n") ||
		!strings.Contains(dump.(string), "  - ssh-ed25519 AAAAC3Nza alice@example\n") || strings.Contains(dump.(string), "package_upgrade") {
		t.Fatalf("dump %q %v", dump, err)
	}
	// Without a drive the PUT does nothing and answers null; a lock refuses it.
	if data, err := callData(t, s, "PUT", "/nodes/pve1/qemu/101/cloudinit", nil); err != nil || data != nil {
		t.Fatalf("PUT without drive %v %v", data, err)
	}
	if ci, _ := s.CloudInit(101); ci.Generations != 0 || ci.Drive != "" {
		t.Fatalf("no drive %+v", ci)
	}
	if _, err := callData(t, s, "PUT", "/nodes/pve1/qemu/101/config", map[string]any{"sata0": "local:cloudinit"}); err != nil {
		t.Fatal(err)
	}
	if g, _ := s.Guest(101); g.Config["sata0"] != "local:101/vm-101-cloudinit.qcow2,media=cdrom" {
		t.Fatalf("dir storage drive %q", g.Config["sata0"])
	}
	if err := s.LockGuest(100, "backup", 0); err != nil {
		t.Fatal(err)
	}
	_, err = callData(t, s, "PUT", path+"/cloudinit", nil)
	errContains(t, err, "VM is locked (backup)")
}

// TestCloudInitHotplug: with "cloudinit" in a running VM's hotplug
// features, vmconfig_hotplug_pending regenerates the drive after a live
// cloud-init change, without PUT …/cloudinit; without it the change waits
// for one.
func TestCloudInitHotplug(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	for id, hp := range map[int]string{100: "network,disk,usb,cloudinit", 101: "network,disk,usb"} {
		if err := s.AddGuest(pvesim.GuestSpec{VMID: id, Running: true,
			Config: map[string]string{"hotplug": hp, "ide2": fmt.Sprintf("local-lvm:vm-%d-cloudinit,media=cdrom", id)}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []int{100, 101} {
		if _, err := callData(t, s, "PUT", fmt.Sprintf("/nodes/pve1/qemu/%d/config", id), map[string]any{"ciuser": "bob"}); err != nil {
			t.Fatal(err)
		}
	}
	if ci, _ := s.CloudInit(100); ci.Generations != 1 || ci.Values["ciuser"] != "bob" {
		t.Fatalf("hotplug cloudinit: %+v, want the drive regenerated with ciuser bob", ci)
	}
	if ci, _ := s.CloudInit(101); ci.Generations != 0 || ci.Changed["ciuser"] == "" && len(ci.Changed) == 0 {
		t.Fatalf("without hotplug cloudinit: %+v, want the change recorded and the drive not regenerated", ci)
	}
}

// TestPoolWriteFaults: an injected failure rate makes pool writes fail
// with user.cfg's lock timeout, as a busy cluster does; nothing changes.
func TestPoolWriteFaults(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	if err := s.AddGuest(pvesim.GuestSpec{VMID: 100}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetFaults(pvesim.Faults{FailRate: 1}); err != nil {
		t.Fatal(err)
	}
	_, err := callData(t, s, "POST", "/pools", map[string]any{"poolid": "prod"})
	errContains(t, err, "lock")
	if len(s.Pools()) != 0 {
		t.Fatalf("pools %v after a failed create", s.Pools())
	}
}
