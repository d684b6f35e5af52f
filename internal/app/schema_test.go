package app_test

import (
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/app"
	"github.com/converge-pve/converge/internal/pveschema"
	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/internal/pvesim/pvesimtest"
	"github.com/converge-pve/converge/planner"
)

// capability is a converge capability and the request that shows it was
// exercised: a test that sent none of them would pass vacuously.
type capability struct {
	name string
	// method is the request's method, or alternatives ("POST|PUT": a
	// QEMU config write is either, see pve.Client.UpdateConfig).
	method string
	path   *regexp.Regexp
	// param, if set, must be among the request's parameters.
	param string
}

func (c capability) seen(reqs []wireRequest) int {
	n := 0
	for _, r := range reqs {
		if !slices.Contains(strings.Split(c.method, "|"), r.Method) || !c.path.MatchString(r.Path) {
			continue
		}
		if _, ok := r.Params[c.param]; c.param == "" || ok {
			n++
		}
	}
	return n
}

// Every request converge sends Proxmox, through every capability, matches
// Proxmox's published API schema (pve-docs, through pveschema): no
// undeclared parameter, no value of the wrong type, format or range. The
// simulator is only the other end of the wire; its own rules are not the
// judge.
// It runs on PVE 8 and 9: an HA guest's desired node is an HA migrate
// request under HA groups and converge's node-affinity rule under HA
// rules.
func TestRequestsMatchSchema(t *testing.T) {
	for _, v := range []string{"8", "9"} {
		t.Run("pve"+v, func(t *testing.T) { testRequestsMatchSchema(t, v) })
	}
}

func testRequestsMatchSchema(t *testing.T, version string) {
	p, rec := startRecordedPipeline(t, pvesim.Options{Nodes: 2, DemoTemplates: true, Version: version}, verifyEveryPass, func(c *app.Config) {
		c.Planner.Planner.Policy.AllowDestroy, c.Executor.Policy.AllowDestroy = true, true
		c.Planner.Planner.Policy.CreatePools, c.Executor.Policy.CreatePools = true, true
		// Keep one protective snapshot: the second restart prunes the
		// first, so the snapshot delete is exercised too.
		c.Planner.Planner.Policy.SnapshotKeep, c.Executor.Policy.SnapshotKeep = 1, 1
		// More disruptive actions than the mass-change guard's default
		// allows in its window are the point here, not a mass change.
		c.Planner.Planner.Limits.GuardMin = 100
	})
	const (
		vmClone, ctClone = 601, 602 // clones of the QEMU and LXC templates
		vmWhole          = 603      // disks, NICs, cloud-init, pool, power
		vmMove, ctMove   = 604, 605 // migrations
		haMove, haPower  = 606, 607 // through HA
		vmSnap           = 608      // protective snapshots before restarts
	)
	for _, g := range []pvesim.GuestSpec{
		{VMID: vmWhole, Node: "pve1", Cores: 1, Config: map[string]string{
			"scsi0": "local-lvm:vm-603-disk-0,size=8G", "ide2": "local-lvm:vm-603-cloudinit,media=cdrom",
			"net0": "virtio=BC:24:11:00:00:03,bridge=vmbr0"}},
		{VMID: vmMove, Node: "pve1", Running: true, Config: map[string]string{"scsi0": "local-lvm:vm-604-disk-0,size=4G"}},
		{VMID: ctMove, Node: "pve1", Kind: pvesim.LXC, Running: true,
			Config: map[string]string{"net0": "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:00:00:05,ip=dhcp,type=veth"}},
		{VMID: haMove, Node: "pve1", Running: true, Tags: []string{events.OwnerTag}},
		{VMID: haPower, Node: "pve1"},
		{VMID: vmSnap, Node: "pve1", Running: true, Cores: 1},
	} {
		if err := p.sim.AddGuest(g); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.sim.AddHAResource(haMove, "started"); err != nil {
		t.Fatal(err)
	}
	if err := p.sim.AddHAResource(haPower, "stopped"); err != nil {
		t.Fatal(err)
	}
	p.pass(t)

	running, stopped, allowed := events.PowerRunning, events.PowerStopped, events.RestartAllowed
	pve2, yes := "pve2", true
	ptr := func(s string) *string { return &s }
	num := func(n int) *int { return &n }
	seqs := map[int]uint64{}
	// Clones, configured (every config field; values the templates do
	// not have, so that each is written) and started; then renamed, as a
	// name given at the clone is sent with the clone, not as config.
	vmWant := func(name string) *events.Desired {
		return &events.Desired{VMID: vmClone, Power: &running, Cores: num(4), MemoryMiB: num(1024),
			Name: ptr(name), Description: ptr("schema check\nsecond line"), Tags: &[]string{"web", "prod"}, OnBoot: &yes,
			Net:   map[string]events.NetWant{"net1": {Model: "e1000", Bridge: "vmbr0"}},
			Clone: &events.Clone{From: 9000, Full: &yes, Storage: "local-lvm"}}
	}
	ctWant := func(name string) *events.Desired {
		return &events.Desired{VMID: ctClone, Power: &running, Cores: num(2), MemoryMiB: num(1024),
			Name: ptr(name), Description: ptr("container"), Tags: &[]string{"ct"}, OnBoot: &yes,
			Clone: &events.Clone{From: 9001}}
	}
	seqs[vmClone], seqs[ctClone] = p.desire(t, vmWant("web1")), p.desire(t, ctWant("ct1"))
	// Disks (a grow, a new one), NICs, cloud-init, a pool that does not
	// exist yet, started.
	key := "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl ops@host"
	rate, mtu, tag, fw := 12.5, 1400, 10, true
	seqs[vmWhole] = p.desire(t, &events.Desired{VMID: vmWhole, Power: &running, Pool: ptr("prod"),
		Disks: map[string]events.DiskWant{"scsi0": {SizeGiB: 16}, "scsi1": {SizeGiB: 2, Storage: "local-lvm"}},
		Net: map[string]events.NetWant{"net0": {Bridge: "vmbr1", Tag: &tag, Firewall: &fw, Rate: &rate, MTU: &mtu},
			"net1": {Model: "virtio", Bridge: "vmbr0"}},
		CloudInit: &events.CloudInit{User: ptr("ops"), SSHKeys: &[]string{key}, Nameserver: ptr("10.0.0.53"),
			SearchDomain: ptr("example.org"), IPConfig: map[string]string{"ipconfig0": "ip=10.0.0.5/24,gw=10.0.0.1"}}})
	// Migrations: a VM online with its local disk, a container by
	// restart; an LXC NIC change on the way.
	seqs[vmMove] = p.desire(t, &events.Desired{VMID: vmMove, Node: &pve2, Power: &running})
	seqs[ctMove] = p.desire(t, &events.Desired{VMID: ctMove, Node: &pve2, Power: &running, Restart: &allowed,
		Net: map[string]events.NetWant{"net0": {IP: "10.1.0.2/24", GW: "10.1.0.1"}}})
	// HA: a migrate request and a requested state.
	seqs[haMove] = p.desire(t, &events.Desired{VMID: haMove, Node: &pve2})
	seqs[haPower] = p.desire(t, &events.Desired{VMID: haPower, Power: &running})
	for _, id := range slices.Sorted(maps.Keys(seqs)) {
		p.converge(t, id, seqs[id])
	}
	p.converge(t, vmClone, p.desire(t, vmWant("web2")))
	p.converge(t, ctClone, p.desire(t, ctWant("ct2")))

	// Protective snapshots: two restarts, the second pruning the first.
	for _, cores := range []int{2, 3} {
		seq := p.desire(t, &events.Desired{VMID: vmSnap, Power: &running, Cores: num(cores), Restart: &allowed,
			SnapshotBefore: []string{events.SnapshotRestart}})
		p.converge(t, vmSnap, seq)
	}
	// Power off; then destroy a VM and a container converge created
	// (running: shut down first) and an HA guest (out of HA first).
	p.converge(t, vmWhole, p.desire(t, &events.Desired{VMID: vmWhole, Power: &stopped}))
	for _, id := range []int{vmClone, ctClone, haMove} {
		seq := p.desire(t, &events.Desired{VMID: id, Absent: true})
		if doc := p.passUntil(t, id, seq, planner.Absent, 30*time.Second); doc == nil || doc.Status.Kind != planner.Absent {
			t.Fatalf("guest %d not destroyed: %+v", id, doc)
		}
	}
	p.settleIn(t, vmWhole) // what the passes above made the planner do has been sent

	reqs := rec.requests()
	guest := func(kind string, ids ...int) string {
		return fmt.Sprintf(`^/nodes/[^/]+/%s/(%s)`, kind, strings.Trim(strings.Join(strings.Fields(fmt.Sprint(ids)), "|"), "[]"))
	}
	re := regexp.MustCompile
	caps := []capability{
		{"power on (QEMU)", "POST", re(`^/nodes/[^/]+/qemu/\d+/status/start$`), ""},
		{"power on (LXC)", "POST", re(`^/nodes/[^/]+/lxc/\d+/status/start$`), ""},
		{"power off", "POST", re(`^/nodes/[^/]+/(qemu|lxc)/\d+/status/(shutdown|stop)$`), ""},
		{"reboot", "POST", re(guest("qemu", vmSnap) + `/status/reboot$`), ""},
		{"config cores (QEMU)", "POST|PUT", re(guest("qemu", vmClone) + `/config$`), "cores"},
		{"config memory (QEMU)", "POST|PUT", re(guest("qemu", vmClone) + `/config$`), "memory"},
		{"config name", "POST|PUT", re(guest("qemu", vmClone) + `/config$`), "name"},
		{"config description", "POST|PUT", re(guest("qemu", vmClone) + `/config$`), "description"},
		{"config tags", "POST|PUT", re(guest("qemu", vmClone) + `/config$`), "tags"},
		{"config onboot", "POST|PUT", re(guest("qemu", vmClone) + `/config$`), "onboot"},
		{"config hostname (LXC)", "PUT", re(guest("lxc", ctClone) + `/config$`), "hostname"},
		{"config memory (LXC)", "PUT", re(guest("lxc", ctClone) + `/config$`), "memory"},
		{"clone of a QEMU template", "POST", re(`^/nodes/[^/]+/qemu/9000/clone$`), "newid"},
		{"clone of an LXC template", "POST", re(`^/nodes/[^/]+/lxc/9001/clone$`), "newid"},
		{"migrate (QEMU)", "POST", re(guest("qemu", vmMove) + `/migrate$`), "target"},
		{"migrate (LXC)", "POST", re(guest("lxc", ctMove) + `/migrate$`), "target"},
		{"disk grow", "PUT", re(guest("qemu", vmWhole) + `/resize$`), "size"},
		{"new disk", "POST|PUT", re(guest("qemu", vmWhole) + `/config$`), "scsi1"},
		{"NIC (QEMU)", "POST|PUT", re(guest("qemu", vmWhole) + `/config$`), "net0"},
		{"new NIC (QEMU)", "POST|PUT", re(guest("qemu", vmClone) + `/config$`), "net1"},
		{"NIC (LXC)", "PUT", re(guest("lxc", ctMove) + `/config$`), "net0"},
		{"cloud-init ipconfig", "POST|PUT", re(guest("qemu", vmWhole) + `/config$`), "ipconfig0"},
		{"cloud-init nameserver", "POST|PUT", re(guest("qemu", vmWhole) + `/config$`), "nameserver"},
		{"cloud-init sshkeys", "POST|PUT", re(guest("qemu", vmWhole) + `/config$`), "sshkeys"},
		{"cloud-init user", "POST|PUT", re(guest("qemu", vmWhole) + `/config$`), "ciuser"},
		{"cloud-init regeneration", "PUT", re(guest("qemu", vmWhole) + `/cloudinit$`), ""},
		{"pool created", "POST", re(`^/pools$`), "poolid"},
		{"pool membership", "PUT", re(`^/pools(/prod)?$`), ""},
		{"HA requested state", "PUT", re(fmt.Sprintf(`^/cluster/ha/resources/vm:%d$`, haPower)), "state"},
		{"HA removal", "DELETE", re(fmt.Sprintf(`^/cluster/ha/resources/vm:%d$`, haMove)), ""},
		{"protective snapshot", "POST", re(guest("qemu", vmSnap) + `/snapshot$`), "snapname"},
		{"snapshot pruned", "DELETE", re(guest("qemu", vmSnap) + `/snapshot/[^/]+$`), ""},
		{"destroy (QEMU)", "DELETE", re(guest("qemu", vmClone, haMove) + `$`), ""},
		{"destroy (LXC)", "DELETE", re(guest("lxc", ctClone) + `$`), ""},
		{"inventory read", "GET", re(`^/cluster/resources$`), ""},
		{"config read", "GET", re(`^/nodes/[^/]+/(qemu|lxc)/\d+/pending$`), ""},
		{"task read", "GET", re(`^/nodes/[^/]+/tasks/[^/]+/status$`), ""},
	}
	if version == "8" {
		caps = append(caps, capability{"HA migrate", "POST", re(fmt.Sprintf(`^/cluster/ha/resources/vm:%d/migrate$`, haMove)), "node"})
	} else {
		caps = append(caps, capability{"HA rules read", "GET", re(`^/cluster/ha/rules$`), ""},
			capability{"HA node-affinity rule", "POST", re(`^/cluster/ha/rules$`), "nodes"})
	}
	for _, c := range caps {
		if c.seen(reqs) == 0 {
			t.Errorf("capability %q sent no %s %s%s: it was not exercised", c.name, c.method, c.path, map[bool]string{true: " with " + c.param}[c.param != ""])
		}
	}

	var violations []string
	counts, unchecked := map[string]int{}, map[string]bool{}
	for _, r := range reqs {
		counts[operation(r)]++
		violations = append(violations, schemaViolations(r)...)
		for _, u := range uncheckedSent(r) {
			unchecked[u] = true
		}
	}
	// pveschema accepts a named format it has no checker for; which of
	// converge's parameters that let through is logged, so the gap in
	// this check is visible rather than silent.
	if len(unchecked) > 0 {
		t.Logf("parameters sent whose schema format pveschema does not check: %s", strings.Join(slices.Sorted(maps.Keys(unchecked)), ", "))
	}
	var lines []string
	for _, op := range slices.Sorted(maps.Keys(counts)) {
		lines = append(lines, fmt.Sprintf("%5d %s", counts[op], op))
	}
	t.Logf("%d requests checked against Proxmox's schema (pve-docs %s), by operation:\n%s", len(reqs), pveschema.PVEDocsVersion, strings.Join(lines, "\n"))
	slices.Sort(violations)
	violations = slices.Compact(violations)
	if len(violations) > 0 {
		t.Errorf("%d requests Proxmox's schema refuses:\n%s", len(violations), strings.Join(violations, "\n"))
	}
}

// The check above can fail: through the same recorder and validation,
// what Proxmox refuses is reported (an undeclared key, a JSON boolean's
// string spelling, an enum miss, a body no parameter can hold), and what
// it takes, a JSON body's booleans and numbers included, is not.
func TestSchemaCheckRefusesWhatProxmoxRefuses(t *testing.T) {
	rec := newWireRecorder(t)
	rec.setTarget(http.NotFoundHandler()) // the answer does not matter here
	send := func(method, path, contentType, body string) {
		req, err := http.NewRequestWithContext(pvesimtest.Context(t), method, rec.url()+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
	}
	cases := []struct {
		method, path, contentType, body string
		want                            []string // substrings of the violations, in order; none: valid
	}{
		{"PUT", "/nodes/pve1/qemu/100/config", "application/json", `{"onboot":true,"memory":1024,"cores":2,"tags":"a;b","delete":["net1","scsi1"]}`, nil},
		{"POST", "/nodes/pve1/qemu/100/config", "application/x-www-form-urlencoded", "cores=2&background_delay=5", nil},
		{"PUT", "/nodes/pve1/qemu/100/config", "application/json", `{"onboot":"true","bogus":1}`,
			[]string{`"bogus": property is not defined in schema`, `"onboot": type check ('boolean') failed - got 'true'`}},
		{"PUT", "/nodes/pve1/qemu/100/config", "application/json", `{"net0":{"model":"virtio"}}`,
			[]string{`body: net0={"model":"virtio"} (a JSON map[string]interface {} has no parameter form)`}},
		{"PUT", "/nodes/pve1/qemu/100/config", "application/json", `{"net0":"virtio,bridge=vmbr0,bogus=1"}`,
			[]string{`"net0": invalid format`}},
		{"POST", "/pools", "application/x-www-form-urlencoded", "poolid=p&nonsense=1", []string{`"nonsense": property is not defined`}},
		{"GET", "/cluster/resources?type=bogus", "", "", []string{`"type": value 'bogus' does not have a value in the enumeration`}},
		{"POST", "/nodes/pve1/qemu/100/no-such-call", "", "", []string{`Method 'POST /nodes/pve1/qemu/100/no-such-call' not implemented`}},
	}
	for _, c := range cases {
		send(c.method, c.path, c.contentType, c.body)
	}
	reqs := rec.requests()
	if len(reqs) != len(cases) {
		t.Fatalf("recorded %d requests, sent %d", len(reqs), len(cases))
	}
	for i, c := range cases {
		got := schemaViolations(reqs[i])
		ok := len(got) == len(c.want)
		for j := 0; ok && j < len(got); j++ {
			ok = strings.Contains(got[j], c.want[j])
		}
		if !ok {
			t.Errorf("%s %s %s: violations\n%s\nwant %q", c.method, c.path, c.body, strings.Join(got, "\n"), c.want)
		}
	}
}
