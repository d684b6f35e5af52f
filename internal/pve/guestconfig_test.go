package pve

import (
	"net/http"
	"reflect"
	"testing"
)

// Payloads below follow what PVE returns (data part of the envelope).

// PVE 7.x QEMU: memory is a JSON number, onboot 0/1, no template key.
const pve7QEMUConfig = `{
  "boot":"order=scsi0;ide2;net0","cores":2,"digest":"5b6c1e7b1d7f4a0e9c3d2b1a0f9e8d7c6b5a4f3e",
  "ide2":"none,media=cdrom","memory":2048,"meta":"creation-qemu=6.1.0,ctime=1650000000",
  "name":"web01","net0":"virtio=AA:BB:CC:DD:EE:FF,bridge=vmbr0,firewall=1","numa":0,"onboot":1,
  "ostype":"l26","scsi0":"local-lvm:vm-100-disk-0,size=32G","scsihw":"virtio-scsi-pci",
  "smbios1":"uuid=8d5b3b8e-6f1c-4b0e-9c1d-2f3e4a5b6c7d","sockets":1,"tags":"prod;web",
  "description":"Web front end","vmgenid":"1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901"}`

// PVE 8.x/9.x QEMU: memory is a string (qemu-server >= 8.0.8), lock
// present, template 1, cpu string.
const pve8QEMUConfig = `{
  "cores":4,"cpu":"x86-64-v2-AES","digest":"0a1b2c3d4e5f60718293a4b5c6d7e8f901234567",
  "lock":"backup","memory":"4096","name":"tmpl-debian","onboot":0,"template":1,
  "scsi0":"local-lvm:base-9000-disk-0,size=8G","sockets":2,"tags":"templates"}`

// LXC: hostname, cpulimit as a string, description with trailing newline,
// comma-separated hand-written tags.
const lxcConfig = `{
  "arch":"amd64","cores":1,"cpulimit":"0.5","description":"db container\n",
  "digest":"fedcba9876543210fedcba9876543210fedcba98","hostname":"db01","memory":1024,
  "net0":"name=eth0,bridge=vmbr0,hwaddr=BC:24:11:00:00:01,ip=dhcp,type=veth","onboot":1,
  "ostype":"debian","rootfs":"local-lvm:vm-200-disk-0,size=8G","swap":512,
  "tags":"DB,Prod","unprivileged":1}`

func TestDecodeGuestConfig(t *testing.T) {
	qemu := GuestRef{Kind: KindQEMU, Node: "pve", VMID: 100}
	lxc := GuestRef{Kind: KindLXC, Node: "pve", VMID: 200}
	for _, tc := range []struct {
		name    string
		ref     GuestRef
		config  string
		pending string
		check   func(t *testing.T, g *GuestConfig)
	}{
		{"pve7 qemu", qemu, pve7QEMUConfig, "", func(t *testing.T, g *GuestConfig) {
			want := GuestConfig{Ref: qemu, Digest: "5b6c1e7b1d7f4a0e9c3d2b1a0f9e8d7c6b5a4f3e", Name: "web01",
				Description: "Web front end", Tags: []string{"prod", "web"}, Cores: 2, Sockets: 1, MemoryMiB: 2048, OnBoot: true}
			compareFields(t, g, &want)
			if g.Raw["memory"] != "2048" || g.Raw["numa"] != "0" || g.Raw["onboot"] != "1" {
				t.Errorf("Raw numbers not canonical strings: %q %q %q", g.Raw["memory"], g.Raw["numa"], g.Raw["onboot"])
			}
			if _, ok := g.Raw["digest"]; ok {
				t.Error("Raw must not hold digest")
			}
			if g.HasPending() {
				t.Error("no pending read, HasPending must be false")
			}
		}},
		{"pve8 qemu template locked", qemu, pve8QEMUConfig, "", func(t *testing.T, g *GuestConfig) {
			want := GuestConfig{Ref: qemu, Digest: "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567", Name: "tmpl-debian",
				Tags: []string{"templates"}, Cores: 4, Sockets: 2, MemoryMiB: 4096, Lock: "backup", Template: true}
			compareFields(t, g, &want)
		}},
		{"lxc", lxc, lxcConfig, "", func(t *testing.T, g *GuestConfig) {
			want := GuestConfig{Ref: lxc, Digest: "fedcba9876543210fedcba9876543210fedcba98", Name: "db01",
				Description: "db container", Tags: []string{"db", "prod"}, Cores: 1, MemoryMiB: 1024, OnBoot: true}
			compareFields(t, g, &want)
			if g.Raw["cpulimit"] != "0.5" {
				t.Errorf("cpulimit = %q, want 0.5", g.Raw["cpulimit"])
			}
		}},
		{"absent keys take defaults (qemu)", qemu, `{"digest":"d","scsi0":"local-lvm:vm-100-disk-0,size=4G"}`, "", func(t *testing.T, g *GuestConfig) {
			want := GuestConfig{Ref: qemu, Digest: "d", Tags: []string{}, Cores: 1, Sockets: 1, MemoryMiB: 512}
			compareFields(t, g, &want)
		}},
		{"absent keys take defaults (lxc: cores unlimited)", lxc, `{"digest":"d","hostname":"ct"}`, "", func(t *testing.T, g *GuestConfig) {
			want := GuestConfig{Ref: lxc, Digest: "d", Name: "ct", Tags: []string{}, Cores: 0, Sockets: 0, MemoryMiB: 512}
			compareFields(t, g, &want)
		}},
		{"scientific notation and string numbers", qemu, `{"digest":"d","cores":"2","sockets":1e0,"memory":2.048e+03,"onboot":"1","template":0}`, "", func(t *testing.T, g *GuestConfig) {
			want := GuestConfig{Ref: qemu, Digest: "d", Tags: []string{}, Cores: 2, Sockets: 1, MemoryMiB: 2048, OnBoot: true}
			compareFields(t, g, &want)
			if g.Raw["memory"] != "2048" {
				t.Errorf("Raw memory = %q, want 2048", g.Raw["memory"])
			}
		}},
		{"memory property string", qemu, `{"digest":"d","memory":"current=1024"}`, "", func(t *testing.T, g *GuestConfig) {
			if g.MemoryMiB != 1024 {
				t.Errorf("MemoryMiB = %d, want 1024", g.MemoryMiB)
			}
		}},
		{"pending values and deletes", qemu, pve7QEMUConfig, `[
			{"key":"cores","value":2,"pending":4},
			{"key":"memory","value":"2048","pending":"4096"},
			{"key":"tags","value":"prod;web","delete":1},
			{"key":"description","value":"Web front end","delete":2},
			{"key":"name","value":"web01"},
			{"key":"sockets","value":1},
			{"key":"balloon","pending":1024},
			{"key":"digest","value":"5b6c1e7b1d7f4a0e9c3d2b1a0f9e8d7c6b5a4f3e"}]`, func(t *testing.T, g *GuestConfig) {
			// Applied values are unchanged by pending ones.
			if g.Cores != 2 || g.MemoryMiB != 2048 {
				t.Errorf("applied cores/memory = %d/%d, want 2/2048", g.Cores, g.MemoryMiB)
			}
			wantPending := map[string]string{"cores": "4", "memory": "4096", "balloon": "1024"}
			if !reflect.DeepEqual(g.Pending, wantPending) {
				t.Errorf("Pending = %v, want %v", g.Pending, wantPending)
			}
			if want := []string{"description", "tags"}; !reflect.DeepEqual(g.PendingDelete, want) {
				t.Errorf("PendingDelete = %v, want %v", g.PendingDelete, want)
			}
			if !g.HasPending() {
				t.Error("HasPending = false")
			}
			if v, ok := g.Effective("cores"); v != "4" || !ok {
				t.Errorf("Effective(cores) = %q, %v", v, ok)
			}
			if _, ok := g.Effective("tags"); ok {
				t.Error("Effective(tags) present, want deleted")
			}
			if v, ok := g.Effective("name"); v != "web01" || !ok {
				t.Errorf("Effective(name) = %q, %v", v, ok)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pending []byte
			if tc.pending != "" {
				pending = []byte(tc.pending)
			}
			g, err := DecodeGuestConfig(tc.ref, []byte(tc.config), pending)
			if err != nil {
				t.Fatalf("DecodeGuestConfig: %v", err)
			}
			tc.check(t, g)
		})
	}
}

func TestDecodeGuestConfigErrors(t *testing.T) {
	ref := GuestRef{Kind: KindQEMU, Node: "pve", VMID: 100}
	for _, tc := range []struct{ name, config, pending string }{
		{"null", `null`, ""},
		{"not an object", `[1]`, ""},
		{"bad memory", `{"memory":"lots"}`, ""},
		{"fractional cores", `{"cores":1.5}`, ""},
		{"bad onboot", `{"onboot":"maybe"}`, ""},
		{"bad pending", `{"cores":1}`, `{"key":"x"}`},
	} {
		if _, err := DecodeGuestConfig(ref, []byte(tc.config), []byte(tc.pending)); err == nil {
			t.Errorf("%s: want error", tc.name)
		}
	}
}

// compareFields compares the normalised fields, not Raw/Pending.
func compareFields(t *testing.T, got, want *GuestConfig) {
	t.Helper()
	g := *got
	g.Raw, g.Pending, g.PendingDelete = nil, nil, nil
	if !reflect.DeepEqual(g, *want) {
		t.Errorf("GuestConfig fields\n got  %+v\n want %+v", g, *want)
	}
}

const clusterResources = `[
  {"id":"qemu/100","type":"qemu","vmid":100,"node":"pve1","name":"web01","status":"running","template":0,
   "maxcpu":2,"maxmem":2147483648,"mem":1073741824,"cpu":0.0123,"uptime":3600,"disk":0,"maxdisk":34359738368,
   "netin":1000,"netout":2000,"diskread":0,"diskwrite":0,"tags":"prod;web","lock":"backup","hastate":"started","pool":"prod"},
  {"id":"lxc/200","type":"lxc","vmid":200,"node":"pve2","name":"db01","status":"stopped","template":0,
   "maxcpu":0.5,"maxmem":1073741824,"uptime":0,"tags":"DB,Prod"},
  {"id":"qemu/9000","type":"qemu","vmid":9000,"node":"pve1","name":"tmpl","status":"stopped","template":1,
   "maxcpu":1,"maxmem":4.294967296e+09,"uptime":0},
  {"id":"qemu/101","type":"qemu","vmid":101,"node":"pve1","status":"unknown","template":0},
  {"id":"node/pve1","type":"node","node":"pve1","status":"online","maxcpu":8,"maxmem":34359738368},
  {"id":"storage/pve1/local","type":"storage","node":"pve1","storage":"local","status":"available"}
]`

func TestDecodeResources(t *testing.T) {
	got, err := DecodeResources([]byte(clusterResources))
	if err != nil {
		t.Fatal(err)
	}
	want := []Resource{
		{VMID: 100, Kind: KindQEMU, Node: "pve1", Name: "web01", Status: "running", Lock: "backup",
			Tags: []string{"prod", "web"}, MaxCPU: 2, MaxMemMiB: 2048, Uptime: 3600, HAState: "started", Pool: "prod"},
		{VMID: 101, Kind: KindQEMU, Node: "pve1", Status: "unknown", Tags: []string{}},
		{VMID: 200, Kind: KindLXC, Node: "pve2", Name: "db01", Status: "stopped", Tags: []string{"db", "prod"},
			MaxCPU: 1, MaxMemMiB: 1024},
		{VMID: 9000, Kind: KindQEMU, Node: "pve1", Name: "tmpl", Status: "stopped", Template: true,
			Tags: []string{}, MaxCPU: 1, MaxMemMiB: 4096},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("DecodeResources\n got  %+v\n want %+v", got, want)
	}
	if got[0].Ref() != (GuestRef{Kind: KindQEMU, Node: "pve1", VMID: 100}) {
		t.Errorf("Ref = %v", got[0].Ref())
	}
	if r, err := DecodeResources([]byte("null")); err == nil {
		t.Errorf("null: %v; want an error, not an empty cluster", r)
	}
	if _, err := DecodeResources([]byte(`[{"type":"qemu","vmid":"x"}]`)); err == nil {
		t.Error("bad vmid: want error")
	}
}

func TestDecodeGuestStatus(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     GuestStatus
		wantErr  bool
	}{
		{"qemu running", `{"vmid":100,"name":"web01","status":"running","qmpstatus":"running","pid":4242,"uptime":3600,
			"cpus":2,"maxmem":2147483648,"mem":1073741824,"ha":{"managed":0},"running-machine":"pc-i440fx-8.1+pve0"}`,
			GuestStatus{Status: "running", QMPStatus: "running", Uptime: 3600}, false},
		{"qemu paused, HA", `{"vmid":100,"status":"running","qmpstatus":"paused","uptime":10,"ha":{"managed":1,"state":"started"}}`,
			GuestStatus{Status: "running", QMPStatus: "paused", Uptime: 10, HAManaged: true}, false},
		{"lxc stopped locked", `{"vmid":200,"status":"stopped","uptime":0,"lock":"backup","cpus":0.5,"ha":{"managed":0}}`,
			GuestStatus{Status: "stopped", Lock: "backup"}, false},
		{"null", `null`, GuestStatus{}, true},
		{"no status", `{"vmid":1}`, GuestStatus{}, true},
	} {
		got, err := DecodeGuestStatus([]byte(tc.in))
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: err = %v, wantErr %v", tc.name, err, tc.wantErr)
			continue
		}
		if err == nil && *got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, *got, tc.want)
		}
	}
}

func TestInventoryOneCall(t *testing.T) {
	f := newFake(t)
	f.onData(http.MethodGet, "/cluster/resources", clusterResources)
	c := f.client(t)
	res, err := c.Inventory(bg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 4 {
		t.Fatalf("got %d guests, want 4", len(res))
	}
	r := f.last()
	if r.Query.Get("type") != "vm" {
		t.Errorf("query type = %q, want vm", r.Query.Get("type"))
	}
	if got := r.Header.Get("Authorization"); got != "PVEAPIToken=root@pam!converge=tok-s3cret-value" {
		t.Errorf("Authorization = %q", got)
	}
	if c.Calls() != 1 {
		t.Errorf("Calls = %d, want 1", c.Calls())
	}
}

func TestGuestConfigReadsAppliedAndPending(t *testing.T) {
	f := newFake(t)
	f.onData(http.MethodGet, "/nodes/pve/lxc/200/config", lxcConfig)
	f.onData(http.MethodGet, "/nodes/pve/lxc/200/pending", `[{"key":"memory","value":1024,"pending":2048},{"key":"hostname","value":"db01"}]`)
	c := f.client(t)
	ref := GuestRef{Kind: KindLXC, Node: "pve", VMID: 200}
	g, err := c.GuestConfig(bg, ref)
	if err != nil {
		t.Fatal(err)
	}
	if g.MemoryMiB != 1024 || g.Pending["memory"] != "2048" || g.Name != "db01" {
		t.Errorf("got memory %d pending %v name %q", g.MemoryMiB, g.Pending, g.Name)
	}
	// A pending list without the digest cannot stand for the config: the
	// applied config is read as well.
	reqs := f.requests()
	if len(reqs) != 2 || reqs[0].Path != "/nodes/pve/lxc/200/pending" || reqs[1].Query.Get("current") != "1" {
		t.Errorf("requests = %+v", reqs)
	}
}

// TestGuestConfigFromPendingAlone: Proxmox lists the digest among the
// pending list's keys (its own printer skips it), so one read gives the
// applied config, the pending changes and the digest, consistently.
func TestGuestConfigFromPendingAlone(t *testing.T) {
	const pendingList = `[
		{"key":"digest","value":"6a1b"},
		{"key":"name","value":"web01"},
		{"key":"cores","value":"2","pending":"4"},
		{"key":"memory","value":2048},
		{"key":"onboot","value":1},
		{"key":"tags","value":"b;a"},
		{"key":"description","value":"hello\nworld","delete":1},
		{"key":"net0","pending":"virtio=AA:BB:CC:DD:EE:FF,bridge=vmbr0"},
		{"key":"balloon","delete":2}]`
	f := newFake(t)
	f.onData(http.MethodGet, "/nodes/pve/qemu/100/pending", pendingList)
	c := f.client(t)
	ref := GuestRef{Kind: KindQEMU, Node: "pve", VMID: 100}
	g, err := c.GuestConfig(bg, ref)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(f.requests()); n != 1 {
		t.Fatalf("%d requests, want only the pending list", n)
	}
	want := &GuestConfig{Ref: ref, Digest: "6a1b", Name: "web01", Description: "hello\nworld", Tags: []string{"a", "b"},
		Cores: 2, Sockets: 1, MemoryMiB: 2048, OnBoot: true,
		Raw: map[string]string{"name": "web01", "cores": "2", "memory": "2048", "onboot": "1", "tags": "b;a",
			"description": "hello\nworld"},
		Pending:       map[string]string{"cores": "4", "net0": "virtio=AA:BB:CC:DD:EE:FF,bridge=vmbr0"},
		PendingDelete: []string{"balloon", "description"}}
	if !reflect.DeepEqual(g, want) {
		t.Errorf("GuestConfig\n got  %+v\n want %+v", g, want)
	}
	// The same guest read the old way, from both answers, is the same.
	cfg := `{"digest":"6a1b","name":"web01","cores":2,"memory":"2048","onboot":1,"tags":"b;a","description":"hello\nworld"}`
	old, err := DecodeGuestConfig(ref, []byte(cfg), []byte(pendingList))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(old, want) {
		t.Errorf("from config and pending\n got  %+v\n want %+v", old, want)
	}
}

func TestGuestReadErrors(t *testing.T) {
	f := newFake(t)
	f.onError(http.MethodGet, "/nodes/pve/qemu/999/config", 500, "Configuration file 'nodes/pve/qemu-server/999.conf' does not exist")
	f.onError(http.MethodGet, "/nodes/pve/qemu/999/pending", 500, "Configuration file 'nodes/pve/qemu-server/999.conf' does not exist")
	f.onError(http.MethodGet, "/nodes/pve/qemu/999/status/current", 500, "Configuration file 'nodes/pve/qemu-server/999.conf' does not exist")
	c := f.client(t)
	ref := GuestRef{Kind: KindQEMU, Node: "pve", VMID: 999}
	_, err := c.GuestConfig(bg, ref)
	e := asError(t, err)
	if e.Class != ClassGone || e.Status != 500 || e.Op != OpReadPending || e.Ref != ref {
		t.Errorf("GuestConfig error = %+v", e)
	}
	if _, err := c.GuestStatus(bg, ref); Classify(err) != ClassGone {
		t.Errorf("GuestStatus class = %v (%v)", Classify(err), err)
	}
	// An invalid ref never reaches the server.
	n := len(f.requests())
	for _, bad := range []GuestRef{
		{Kind: "vm", Node: "pve", VMID: 100},
		{Kind: KindQEMU, Node: "../x", VMID: 100},
		{Kind: KindQEMU, Node: "pve", VMID: 99},
	} {
		if _, err := c.GuestConfig(bg, bad); Classify(err) != ClassTerminal {
			t.Errorf("GuestConfig(%v) class = %v", bad, Classify(err))
		}
	}
	if len(f.requests()) != n {
		t.Error("invalid refs were sent")
	}
}
