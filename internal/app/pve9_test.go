package app_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/internal/pvesim/pvesimtest"
)

// TestHibernatedStateKeysNoDrift: on PVE 9 a VM suspended to disk carries
// qemu-server's internal keys in its current config (vmstate,
// runningmachine, runningcpu, running-nets-host-mtu; a running VM's config
// carries none of them: qemu-server writes them only with a saved state,
// see pvesim's TestHibernateStateKeys). Observed, planned and converged
// with its desired state (stopped, the cores it has), it reaches Proxmox
// with no mutation: the keys never read as drift and converge never writes
// them.
func TestHibernatedStateKeysNoDrift(t *testing.T) {
	p := startPipeline(t, pvesim.Options{Version: "9"}, verifyEveryPass)
	const vmid = 402
	if err := p.sim.AddGuest(pvesim.GuestSpec{VMID: vmid, Cores: 2, Running: true, Name: "hib",
		Config: map[string]string{"net1": "virtio=BC:24:11:00:00:02,bridge=vmbr0,mtu=1400"}}); err != nil {
		t.Fatal(err)
	}
	hibernate(t, p.sim, vmid)
	g, _ := p.sim.Guest(vmid)
	if g.Status != "stopped" || g.Lock != "suspended" || g.Config["running-nets-host-mtu"] != "net0=1500,net1=1400" ||
		g.Config["runningmachine"] == "" || g.Config["vmstate"] == "" {
		t.Fatalf("hibernated guest: %+v", g)
	}
	before := p.sim.Mutations()
	cores, stopped := 2, events.PowerStopped
	seq := p.desire(t, &events.Desired{VMID: vmid, Cores: &cores, Power: &stopped})
	p.converge(t, vmid, seq)
	p.settle(t, vmid)
	if n := p.sim.Mutations() - before; n != 0 {
		t.Fatalf("%d mutations for a hibernated guest with its desired state (results %+v)", n, p.results(t, vmid))
	}
	if g, _ := p.sim.Guest(vmid); g.Config["running-nets-host-mtu"] != "net0=1500,net1=1400" || g.Lock != "suspended" {
		t.Fatalf("converge changed the hibernated guest: %+v", g)
	}
}

// hibernate suspends a running VM to disk through the Proxmox API
// (POST …/status/suspend todisk=1) and waits for its task.
func hibernate(t *testing.T, sim *pvesim.Sim, vmid int) {
	t.Helper()
	g, _ := sim.Guest(vmid)
	url := sim.URL() + "/nodes/" + g.Node + "/qemu/" + strconv.Itoa(vmid) + "/status/suspend"
	req, err := http.NewRequestWithContext(pvesimtest.Context(t), "POST", url, strings.NewReader("todisk=1"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "PVEAPIToken="+pvesimtest.TokenID+"="+pvesimtest.TokenSecret)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body struct {
		Data string `json:"data"`
	}
	if err := json.UnmarshalRead(res.Body, &body); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("suspend: %s %v", res.Status, err)
	}
	if ti, err := sim.WaitTask(pvesimtest.Context(t), body.Data); err != nil || ti.ExitStatus != "OK" {
		t.Fatalf("suspend task: %+v %v", ti, err)
	}
}

// TestClonedContainerKeepsTemplatePrivilege: converge never creates a
// container from scratch (it sends no POST /nodes/{node}/lxc; it clones
// templates, internal/pve Clone), so PVE 9's new create default
// (unprivileged unless asked, pve-container 6.0.6) never applies to its
// guests: a clone keeps its template's flag (pve-container clone_vm has
// no unprivileged parameter and copies the key). Here on the PVE 9
// simulator: a clone of the unprivileged template 9001 is unprivileged,
// one of a template that says unprivileged: 0 stays privileged.
func TestClonedContainerKeepsTemplatePrivilege(t *testing.T) {
	p := startPipeline(t, pvesim.Options{Version: "9", DemoTemplates: true}, verifyOff)
	if err := p.sim.AddGuest(pvesim.GuestSpec{VMID: 9002, Kind: pvesim.LXC, Template: true, Name: "privileged",
		Config: map[string]string{"unprivileged": "0"}}); err != nil {
		t.Fatal(err)
	}
	p.pass(t)
	stopped := events.PowerStopped
	want := map[int]string{601: "1", 602: "0"}
	for vmid, from := range map[int]int{601: 9001, 602: 9002} {
		seq := p.desire(t, &events.Desired{VMID: vmid, Power: &stopped, Clone: &events.Clone{From: from}})
		p.converge(t, vmid, seq)
		g, ok := p.sim.Guest(vmid)
		if !ok || g.Kind != pvesim.LXC || g.Config["unprivileged"] != want[vmid] {
			t.Errorf("clone %d of template %d: %+v, want unprivileged %q", vmid, from, g, want[vmid])
		}
		if ts := tasksOf(p.sim, vmid); len(ts) == 0 || ts[0] != "vzclone" {
			t.Errorf("tasks for %d: %v, want a clone first", vmid, ts)
		}
	}
}
