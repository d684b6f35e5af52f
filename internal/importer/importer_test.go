package importer

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
)

var now = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

func vm(mod func(o *events.Observed)) *events.Observed {
	o := &events.Observed{VMID: 101, Exists: true, Node: "pve1", Kind: events.QEMU, Status: "running",
		Config: events.GuestConfig{Name: "web", Tags: []string{"a"}, Cores: 2, MemoryMiB: 1024,
			Disks: map[string]events.Disk{"scsi0": {Volume: "local-lvm:vm-101-disk-0", SizeBytes: 32 * events.GiB},
				"ide2": {Volume: "local-lvm:vm-101-cloudinit", SizeBytes: 4 << 20, Media: "cdrom"}},
			Net:       map[string]string{"net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0,firewall=1,tag=20"},
			CloudInit: map[string]string{"ciuser": "ops", "ipconfig0": "gw=10.0.0.1,ip=10.0.0.5/24"}}}
	if mod != nil {
		mod(o)
	}
	return o
}

func notes(g Guest) string { return strings.Join(g.Notes, "\n") }

// Each hard case imports to a valid desired state the planner plans
// nothing from (restart allowed), leaving out with a note what a desired
// state cannot hold.
func TestImportIsQuiet(t *testing.T) {
	for name, c := range map[string]struct {
		mod  func(o *events.Observed)
		note string
		want func(d *events.Desired) bool
	}{
		"plain VM": {nil, "", func(d *events.Desired) bool {
			return *d.Power == events.PowerRunning && *d.Node == "pve1" && d.Disks["scsi0"].SizeGiB == 32 && d.CloudInit.IPConfig["ipconfig0"] != ""
		}},
		"HA started":                      {func(o *events.Observed) { o.HA = "started" }, "from HA state started", func(d *events.Desired) bool { return *d.Power == events.PowerRunning && d.Node == nil }},
		"HA stopped, guest still running": {func(o *events.Observed) { o.HA = "stopped" }, "from HA state stopped", func(d *events.Desired) bool { return *d.Power == events.PowerStopped }},
		"HA disabled":                     {func(o *events.Observed) { o.HA, o.Status = "disabled", "stopped" }, "", func(d *events.Desired) bool { return *d.Power == events.PowerStopped }},
		"HA ignored":                      {func(o *events.Observed) { o.HA = "ignored" }, "HA state ignored", func(d *events.Desired) bool { return d.Power == nil }},
		"paused":                          {func(o *events.Observed) { o.Status = "paused" }, "power: left out", func(d *events.Desired) bool { return d.Power == nil }},
		"pending cores and NIC": {func(o *events.Observed) {
			o.Pending = map[string]string{"cores": "4", "net0": "virtio=BC:24:11:00:00:01,bridge=vmbr1"}
		}, "restart: never", func(d *events.Desired) bool {
			return *d.Cores == 4 && *d.Restart == events.RestartNever && d.Net["net0"].Bridge == "vmbr1"
		}},
		"pending removals": {func(o *events.Observed) {
			o.Config.Disks["scsi1"] = events.Disk{Volume: "local-lvm:vm-101-disk-1", SizeBytes: events.GiB}
			o.Pending = map[string]string{"scsi1": "", "ipconfig0": ""}
		}, "removal is pending", func(d *events.Desired) bool { _, ok := d.Disks["scsi1"]; return !ok && d.CloudInit.IPConfig == nil }},
		"disk not whole GiB": {func(o *events.Observed) {
			o.Config.Disks["scsi1"] = events.Disk{Volume: "local-lvm:vm-101-disk-1", SizeBytes: 1536 << 20}
		}, "1.50 GiB", func(d *events.Desired) bool { _, ok := d.Disks["scsi1"]; return !ok }},
		"container, cores unlimited, mount point": {func(o *events.Observed) {
			o.Kind, o.Config.Cores, o.Config.CloudInit = events.LXC, 0, nil
			o.Config.Disks = map[string]events.Disk{"rootfs": {Volume: "local-lvm:subvol-101-disk-0", SizeBytes: 8 * events.GiB},
				"mp0": {Volume: "local-lvm:subvol-101-disk-1", SizeBytes: 4 * events.GiB}, "mp1": {Volume: "/srv/share"}}
			o.Config.Net = map[string]string{"net0": "name=eth0,bridge=vmbr0,gw=10.0.0.1,hwaddr=BC:24:11:00:00:02,ip=10.0.0.9/24,type=veth"}
		}, "not limited", func(d *events.Desired) bool {
			return d.Cores == nil && d.Disks["mp0"].SizeGiB == 4 && d.Net["net0"].IP == "10.0.0.9/24" && d.CloudInit == nil
		}},
		"locked, no name, converge-owned": {func(o *events.Observed) {
			o.Lock, o.Config.Name, o.Config.Tags = "backup", "", []string{"a", events.OwnerTag}
		}, "locked (backup)", func(d *events.Desired) bool { return d.Name == nil && len(*d.Tags) == 1 }},
		"name Proxmox takes, a desired state does not": {func(o *events.Observed) { o.Config.Name = "web_1" }, "name: left out", func(d *events.Desired) bool { return d.Name == nil }},
	} {
		t.Run(name, func(t *testing.T) {
			o := vm(c.mod)
			g := Import(o, now)
			if err := g.Desired.Validate(o.VMID); err != nil {
				t.Fatalf("invalid: %v", err)
			}
			if steps := plan(&g.Desired, o, now); len(steps) > 0 {
				t.Fatalf("the planner would %s: %s", steps[0].Op, steps[0].Reason)
			}
			if strings.Contains(notes(g), "the planner would act") {
				t.Errorf("the conversion was not exact, the check corrected it: %s", notes(g))
			}
			if c.note != "" && !strings.Contains(notes(g), c.note) {
				t.Errorf("notes do not say %q: %s", c.note, notes(g))
			}
			if !c.want(&g.Desired) {
				body, _ := events.Encode(&g.Desired)
				t.Errorf("desired %s", body)
			}
		})
	}
}

// The planner's check leaves out a field the conversion got wrong, with
// the planner's reason: an import never publishes a change.
func TestCheckLeavesOutWhatThePlannerWouldChange(t *testing.T) {
	o := vm(nil)
	g := FromObserved(o)
	two, node := 3, "pve2"
	g.Desired.Cores, g.Desired.Node = &two, &node
	g.check(o, now)
	if g.Desired.Cores != nil || g.Desired.Node != nil || len(plan(&g.Desired, o, now)) > 0 {
		t.Fatalf("cores %v node %v still managed", g.Desired.Cores, g.Desired.Node)
	}
	if !strings.Contains(notes(g), "cores: left out: the planner would act on it") || !strings.Contains(notes(g), "node: left out") {
		t.Errorf("notes: %s", notes(g))
	}
}

// A guest already managed keeps its desired state unless it is the one
// imported; JSON output leaves notes to stderr.
func TestKeepManagedAndRender(t *testing.T) {
	res := &Result{Guests: []Guest{Import(vm(nil), now), Import(vm(func(o *events.Observed) { o.VMID = 102 }), now)}}
	same := res.Guests[0].Desired
	one := 1
	other := events.Desired{VMID: 102, Cores: &one}
	err := KeepManaged(res, func(vmid int) (*events.Desired, uint64, error) {
		if vmid == 101 {
			return &same, 7, nil
		}
		return &other, 9, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Guests[0].Kept || !res.Guests[1].Kept || *res.Guests[1].Desired.Cores != 1 || !strings.Contains(notes(res.Guests[1]), "journal #9") {
		t.Fatalf("kept: %+v", res.Guests)
	}
	var out, errOut bytes.Buffer
	if err := Render(&out, res, JSON, &errOut); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "#") || !strings.Contains(errOut.String(), "102: already managed") {
		t.Errorf("JSON %s\nstderr %s", out.String(), errOut.String())
	}
	out.Reset()
	if err := Render(&out, res, YAML, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "  # 102: already managed") || !strings.HasPrefix(strings.Split(out.String(), "guests:\n")[1], "  - vmid: 101\n") {
		t.Errorf("YAML:\n%s", out.String())
	}
}

// An HA guest converge placed by its own node-affinity rule is imported
// with that rule's node: without it, publishing the import would make
// converge delete its rule (a mutation). Another HA guest's node is left
// out: a desired node would make converge write a rule.
func TestImportKeepsOwnHARuleNode(t *testing.T) {
	o := vm(func(o *events.Observed) {
		o.HA = "started"
		o.HAPlacement = &events.HAPlacement{Rule: events.HARuleName(101), Nodes: []string{"pve2"}}
	})
	g := Import(o, now)
	if g.Desired.Node == nil || *g.Desired.Node != "pve2" {
		t.Fatalf("node %v: want pve2, converge's rule's", g.Desired.Node)
	}
	for _, s := range plan(&g.Desired, o, now) {
		t.Errorf("publishing the import plans %s: %s", s.Op, s.Reason)
	}
	other := vm(func(o *events.Observed) {
		o.HA = "started"
		o.HAPlacement = &events.HAPlacement{Rule: "prod", Nodes: []string{"pve1", "pve2"}}
	})
	if g := Import(other, now); g.Desired.Node != nil {
		t.Errorf("node %v for a guest an operator's rule places: want none", *g.Desired.Node)
	}
}
