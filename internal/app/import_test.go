package app_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/app"
	"github.com/converge-pve/converge/internal/importer"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/internal/pvesim/pvesimtest"
	"github.com/converge-pve/converge/planner"
)

// estateGuests is the size of the imported estate (plus two templates).
const estateGuests = 120

// TestImportEstateQuiet imports an estate of 120 guests on 3 nodes with
// the hard cases (QEMU and LXC; HA started, stopped, disabled, ignored;
// pools; pending cores, memory and NICs; disks not a whole number of GiB; container
// mount points, one a bind mount; cloud-init; locked guests; templates)
// on PVE 8 and 9, under both deployment restart policies, publishes the
// import as `desire -f` would, and shows that five observer passes, once
// the planner has folded them and nothing acts, made no Proxmox mutation;
// importing again, kept or --observed, gives the same file.
func TestImportEstateQuiet(t *testing.T) {
	for _, c := range []struct {
		version string
		restart events.Restart
	}{{"8", events.RestartNever}, {"9", events.RestartAllowed}, {"9", events.RestartNever}, {"8", events.RestartAllowed}} {
		t.Run(fmt.Sprintf("PVE%s/restart-%s", c.version, c.restart), func(t *testing.T) {
			importEstate(t, c.version, c.restart)
		})
	}
}

func importEstate(t *testing.T, version string, restart events.Restart) {
	p := startPipeline(t, pvesim.Options{Nodes: 3, Version: version}, verifyEveryPass,
		func(c *app.Config) { c.Planner.Planner.Policy.Restart = restart })
	seedEstate(t, p.sim)
	first, res := importAll(t, p, false)
	if len(res.Guests) != estateGuests {
		t.Fatalf("imported %d guests, want %d (templates left out); skipped %v", len(res.Guests), estateGuests, res.Skipped)
	}
	for _, want := range []string{"not a whole number of GiB", "locked (backup)", "restart: never", "HA state ignored",
		"power running from HA state started", "net.net0: pending in Proxmox", "power stopped from HA state stopped", "a template (--templates", "disks.mp1: left out"} {
		if !strings.Contains(first, want) {
			t.Errorf("the import says nowhere %q", want)
		}
	}
	mountPoints := 0
	for _, g := range res.Guests {
		for _, n := range g.Notes {
			if strings.Contains(n, "the planner would act") {
				// The conversion itself must be exact: the planner's
				// check is a safety net, not the way it gets there.
				t.Errorf("guest %d: %s", g.Desired.VMID, n)
			}
		}
		if _, ok := g.Desired.Disks["mp0"]; ok {
			mountPoints++
		}
	}
	if mountPoints == 0 {
		t.Error("no container mount point imported")
	}

	before := p.sim.Mutations()
	publishFile(t, p, first)
	for range 5 {
		p.pass(t)
	}
	docs := settledAll(t, p)
	if n := p.sim.Mutations() - before; n != 0 {
		for _, d := range docs {
			if d.View.LastAction != nil {
				t.Logf("guest %d: %s %s", d.View.VMID, d.View.LastAction.Op, d.View.LastAction.Reason)
			}
		}
		t.Fatalf("%d Proxmox mutations after publishing the import", n)
	}
	states := map[planner.StatusKind]int{}
	for _, d := range docs {
		states[d.Status.Kind]++
		switch {
		case d.Status.Kind == planner.Converged:
		case d.Status.Kind == planner.Pending && strings.Contains(d.Status.Reason, "waits for a restart (restart: never"):
			// The pending changes the import wrote with restart: never.
		case d.Status.Kind == planner.Unmanaged && d.View.VMID >= 900:
			// The templates, not imported.
		default:
			t.Errorf("guest %d is %s: %s", d.View.VMID, d.Status.Kind, d.Status.Reason)
		}
	}
	t.Logf("PVE %s, restart %s: %d guests, states %v, 0 mutations over 5 passes", version, restart, len(docs), states)

	again, _ := importAll(t, p, false)
	if again != first {
		t.Errorf("import → desire → import differs:\n%s", lineDiff(first, again))
	}
	observed, _ := importAll(t, p, true)
	if observed != first {
		t.Errorf("import --observed after desire differs:\n%s", lineDiff(first, observed))
	}

	// The count is not vacuous: one stopped guest's cores changed in the
	// file is one config write, seen by the same measure.
	changed := strings.Replace(first, "  - vmid: 203\n    cores: 4\n", "  - vmid: 203\n    cores: 5\n", 1)
	if changed == first {
		t.Fatal("guest 203 is not in the import as expected")
	}
	before = p.sim.Mutations()
	publishFile(t, p, changed)
	for range 5 {
		p.pass(t)
	}
	settledAll(t, p)
	if n := p.sim.Mutations() - before; n != 1 {
		t.Errorf("one changed value made %d mutations, want 1", n)
	}
}

// seedEstate makes the estate: guest i is 200+i on pve(i%3+1).
func seedEstate(t *testing.T, sim *pvesim.Sim) {
	t.Helper()
	for _, pool := range []string{"web", "db"} {
		if err := sim.AddPool(pool); err != nil {
			t.Fatal(err)
		}
	}
	c := pvesimtest.Client(t, sim)
	ctx := pvesimtest.Context(t)
	sshKeys := events.EncodeSSHKeys([]string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGtest ops@example"})
	for i := range estateGuests {
		id := 200 + i
		s := pvesim.GuestSpec{VMID: id, Node: fmt.Sprintf("pve%d", i%3+1), Name: fmt.Sprintf("imp-%d", i),
			Running: i%2 == 0, OnBoot: i%3 == 0, Cores: 1 + i%4, MemoryMiB: 512 * (1 + i%3),
			Tags: []string{"estate", fmt.Sprintf("tier%d", i%3)}, Config: map[string]string{}}
		if i%5 == 0 {
			s.Description = fmt.Sprintf("guest %d\nimported", i)
		}
		lxc := i%4 == 3
		switch {
		case lxc:
			s.Kind = pvesim.LXC
			if i%8 == 3 {
				s.Config["mp0"] = fmt.Sprintf("local-lvm:subvol-%d-disk-1,mp=/srv/data,size=4G", id)
			} else {
				s.Config["mp0"] = fmt.Sprintf("local-lvm:subvol-%d-disk-1,mp=/srv/data,size=500M", id)
				s.Config["mp1"] = "/mnt/host/share,mp=/share"
			}
		case i%10 == 1:
			s.Config["scsi1"] = fmt.Sprintf("local-lvm:vm-%d-disk-1,size=1536M", id)
		case i%10 == 5:
			s.Config["ide2"] = fmt.Sprintf("local-lvm:vm-%d-cloudinit,media=cdrom", id)
			s.Config["ciuser"] = "ops"
			s.Config["ipconfig0"] = fmt.Sprintf("ip=10.0.%d.%d/24,gw=10.0.%d.1", i%3, i, i%3)
			s.Config["nameserver"] = "10.0.0.53"
			s.Config["searchdomain"] = "example.org"
			s.Config["sshkeys"] = sshKeys
		case i%10 == 8:
			s.Config["hotplug"] = "disk,usb" // no network hotplug: a NIC change waits
		case i%10 == 7:
			s.Config["net1"] = fmt.Sprintf("virtio=BC:24:11:00:%02X:01,bridge=vmbr0,rate=12.5,tag=20", i)
		}
		if err := sim.AddGuest(s); err != nil {
			t.Fatal(err)
		}
		kind := pve.KindQEMU
		if lxc {
			kind = pve.KindLXC
		}
		ref := pve.GuestRef{Kind: kind, Node: s.Node, VMID: id}
		switch i % 6 {
		case 0:
			mustDo(t, c.SetPool(ctx, "web", id, false))
		case 1:
			mustDo(t, c.SetPool(ctx, "db", id, false))
		}
		// Pending changes: a running VM keeps cores and memory for its
		// restart.
		if !lxc && s.Running {
			switch i % 10 {
			case 0:
				mustUpdate(t, c, ref, map[string]string{"cores": "6"})
			case 4:
				mustUpdate(t, c, ref, map[string]string{"memory": "4096"})
			case 6:
				mustUpdate(t, c, ref, map[string]string{"cores": "8", "memory": "3072", "description": "changed by hand"})
			case 8:
				g, _ := sim.Guest(id)
				mustUpdate(t, c, ref, map[string]string{"net0": strings.Replace(g.Config["net0"], "firewall=1", "firewall=1,tag=30", 1)})
			}
		}
	}
	for i, state := range map[int]string{0: "started", 2: "started", 1: "stopped", 3: "stopped", 4: "ignored", 5: "ignored", 7: "disabled"} {
		mustDo(t, sim.AddHAResource(200+i, state))
	}
	for _, i := range []int{10, 11, 15} {
		mustDo(t, sim.LockGuest(200+i, map[int]string{10: "backup", 11: "snapshot", 15: "backup"}[i], 0))
	}
	mustDo(t, sim.AddGuest(pvesim.GuestSpec{VMID: 900, Template: true, Name: "tmpl-vm"}))
	mustDo(t, sim.AddGuest(pvesim.GuestSpec{VMID: 901, Kind: pvesim.LXC, Template: true, Name: "tmpl-ct"}))
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mustUpdate(t *testing.T, c *pve.Client, ref pve.GuestRef, set map[string]string) {
	t.Helper()
	if _, err := c.UpdateConfig(pvesimtest.Context(t), ref, pve.ConfigChange{Set: set}); err != nil {
		t.Fatal(err)
	}
}

// importAll imports every guest as `converge import --all` does (with
// --observed if observed), and renders it as YAML.
func importAll(t *testing.T, p *pipeline, observed bool) (string, *importer.Result) {
	t.Helper()
	ctx := pvesimtest.Context(t)
	res, err := importer.Read(ctx, pvesimtest.Client(t, p.sim), importer.Selection{All: true}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !observed {
		err := importer.KeepManaged(res, func(vmid int) (*events.Desired, uint64, error) {
			doc, err := p.rd.Guest(ctx, vmid)
			if err != nil || doc == nil || doc.View == nil || doc.View.Desired == nil {
				return nil, 0, err
			}
			return doc.View.Desired, doc.View.DesiredSeq, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var out, notes bytes.Buffer
	if err := importer.Render(&out, res, importer.YAML, &notes); err != nil {
		t.Fatal(err)
	}
	return out.String(), res
}

// publishFile publishes every entry of a YAML file as `desire -f` does:
// each validated, then journalled as it is.
func publishFile(t *testing.T, p *pipeline, file string) {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Guests []json.RawMessage `json:"guests"`
	}
	if err := json.Unmarshal(js, &doc); err != nil {
		t.Fatal(err)
	}
	for _, e := range doc.Guests {
		var head struct {
			VMID int `json:"vmid"`
		}
		mustDo(t, json.Unmarshal(e, &head))
		if _, err := events.DecodeDesired(e, head.VMID); err != nil {
			t.Fatalf("entry for %d refused: %v", head.VMID, err)
		}
		m, err := events.DesiredBodyMessage(head.VMID, e, events.PublishOptions{Publisher: "import-test"})
		mustDo(t, err)
		if _, err := p.a.Bus().Append(pvesimtest.Context(t), m, journal.Expect{}); err != nil {
			t.Fatal(err)
		}
	}
}
