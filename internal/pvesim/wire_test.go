package pvesim_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	proxmox "github.com/luthermonson/go-proxmox"

	"github.com/converge-pve/converge/internal/pvesim"
)

func TestTicketLogin(t *testing.T) {
	s := startSim(t, pvesim.Options{Guests: 3})
	ctx := ctxT(t)
	c := proxmox.NewClient(s.URL(), proxmox.WithHTTPClient(httpClient()),
		proxmox.WithCredentials(&proxmox.Credentials{Username: "root@pam", Password: password}))
	v, err := c.Version(ctx)
	if err != nil || !strings.HasPrefix(v.Release, "9.") { // the default release
		t.Fatalf("version via ticket: %+v %v", v, err)
	}
	// a write with the ticket carries the CSRF token go-proxmox got
	n, err := c.Node(ctx, "pve1")
	if err != nil {
		t.Fatal(err)
	}
	vm, err := n.VirtualMachine(ctx, 101)
	if err != nil {
		t.Fatal(err)
	}
	task, err := vm.Start(ctx)
	mustOK(t, s, task, err)
	if !strings.HasSuffix(string(task.UPID), ":root@pam:") {
		t.Fatalf("ticket tasks carry the user: %s", task.UPID)
	}

	bad := proxmox.NewClient(s.URL(), proxmox.WithHTTPClient(httpClient()),
		proxmox.WithCredentials(&proxmox.Credentials{Username: "root@pam", Password: "wrong"}))
	if _, err := bad.Version(ctx); !errors.Is(err, proxmox.ErrNotAuthorized) {
		t.Fatalf("bad password: %v", err)
	}

	// raw: form login, cookie without CSRF on a write is refused
	res, body := raw(t, "POST", s.URL()+"/access/ticket", map[string]string{"Content-Type": "application/x-www-form-urlencoded"},
		url.Values{"username": {"root"}, "realm": {"pam"}, "password": {password}}.Encode())
	if res.StatusCode != 200 {
		t.Fatalf("form login: %s", res.Status)
	}
	data := body["data"].(map[string]any)
	tk, csrf := data["ticket"].(string), data["CSRFPreventionToken"].(string)
	if !strings.HasPrefix(tk, "PVE:root@pam:") || data["username"] != "root@pam" {
		t.Fatalf("ticket %q", tk)
	}
	cookie := map[string]string{"Cookie": "PVEAuthCookie=" + url.QueryEscape(tk)}
	if res, _ := raw(t, "GET", s.URL()+"/version", cookie, ""); res.StatusCode != 200 {
		t.Fatalf("GET with cookie: %s", res.Status)
	}
	res, _ = raw(t, "POST", s.URL()+"/nodes/pve1/qemu/100/status/stop", cookie, "")
	if res.Status != "401 Permission denied - invalid csrf token" {
		t.Fatalf("write without CSRF: %q", res.Status)
	}
	cookie["CSRFPreventionToken"] = csrf
	if res, _ := raw(t, "POST", s.URL()+"/nodes/pve1/qemu/100/status/stop", cookie, ""); res.StatusCode != 200 {
		t.Fatalf("write with CSRF: %s", res.Status)
	}
	// renewal: a valid ticket as password gives a new ticket
	res, _ = raw(t, "POST", s.URL()+"/access/ticket", map[string]string{"Content-Type": "application/json"},
		`{"username":"root@pam","password":"`+tk+`"}`)
	if res.StatusCode != 200 {
		t.Fatalf("renewal: %s", res.Status)
	}
}

func TestTokenAuthAnd401s(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	for _, tc := range []struct {
		name, auth, want string
	}{
		{"no auth", "", "401 No ticket"},
		{"wrong secret", "PVEAPIToken=" + tokenID + "=nope", "401 invalid token value!"},
		{"unknown token", "PVEAPIToken=root@pam!other=" + tokenSecret, "401 invalid token value!"},
		{"garbage", "Bearer x", "401 authentication failure"},
		{"ok", "PVEAPIToken=" + tokenID + "=" + tokenSecret, "200 OK"},
		{"ok, space form", "PVEAPIToken " + tokenID + "=" + tokenSecret, "200 OK"},
	} {
		hdr := map[string]string{}
		if tc.auth != "" {
			hdr["Authorization"] = tc.auth
		}
		res, _ := raw(t, "GET", s.URL()+"/cluster/resources", hdr, "")
		if res.Status != tc.want {
			t.Errorf("%s: status %q, want %q", tc.name, res.Status, tc.want)
		}
	}
	c := proxmox.NewClient(s.URL(), proxmox.WithHTTPClient(httpClient()), proxmox.WithAPIToken(tokenID, "wrong"))
	if _, err := c.Version(context.Background()); !errors.Is(err, proxmox.ErrNotAuthorized) {
		t.Fatalf("go-proxmox with a bad token: %v", err)
	}
}

// TestWireRules checks the status line, error body, 501 and HTTP/1.1-only
// rules, under TLS, which is where HTTP/2 would otherwise be negotiated.
func TestWireRules(t *testing.T) {
	s := startSim(t, pvesim.Options{TLS: true, Guests: 3})
	if !strings.HasPrefix(s.URL(), "https://") || len(s.Fingerprint()) != 95 {
		t.Fatalf("TLS url %s fingerprint %q", s.URL(), s.Fingerprint())
	}
	h2 := &http.Client{Transport: &http.Transport{ForceAttemptHTTP2: true,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // test-only: simulator cert
	req, _ := http.NewRequest("GET", s.URL()+"/version", nil)
	req.Header.Set("Authorization", "PVEAPIToken="+tokenID+"="+tokenSecret)
	res, err := h2.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.Proto != "HTTP/1.1" {
		t.Fatalf("negotiated %s, want HTTP/1.1", res.Proto)
	}

	res2, body := raw(t, "POST", s.URL()+"/nodes/pve1/lxc/102/status/start", tokenHdr(), "")
	if res2.Status != "500 CT 102 already running" || body["message"] != "CT 102 already running\n" || body["data"] != nil {
		t.Fatalf("LXC start of running CT: %q %v", res2.Status, body)
	}
	if res2.Header.Get("Connection") != "close" && !res2.Close {
		t.Fatal("pveproxy closes the connection on errors")
	}
	ctx := ctxT(t)
	n, _ := tokenClient(s).Node(ctx, "pve1")
	ct, err := n.Container(ctx, 102)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ct.Start(ctx)
	errContains(t, err, "500 CT 102 already running")

	res3, _ := raw(t, "GET", s.URL()+"/nodes/pve1/nonsense", tokenHdr(), "")
	if res3.Status != "501 Method 'GET /nodes/pve1/nonsense' not implemented" {
		t.Fatalf("unknown path: %q", res3.Status)
	}
	res4, body := raw(t, "PUT", s.URL()+"/nodes/pve1/qemu/100/config", tokenHdr(), "cores=abc&bogus=1")
	if res4.Status != "400 Parameter verification failed." {
		t.Fatalf("bad params: %q", res4.Status)
	}
	errs := body["errors"].(map[string]any)
	if errs["cores"] != "type check ('integer') failed - got 'abc'\n" || !strings.Contains(errs["bogus"].(string), "not defined in schema") {
		t.Fatalf("400 errors: %v", errs)
	}
	_, err = n.Storage(ctx, "nope")
	errContains(t, err, `{"storage":"No such storage.\n"}`)
	st, err := n.Storage(ctx, "local-lvm")
	if err != nil || st.Type != "lvmthin" {
		t.Fatalf("storage: %+v %v", st, err)
	}
	_, err = tokenClient(s).Node(ctx, "ghost")
	errContains(t, err, "500 hostname lookup 'ghost' failed")
}

// TestJSONTyping pins PVE's typing quirks that clients depend on.
func TestJSONTyping(t *testing.T) {
	for _, ver := range []string{"7", "8", "9"} {
		t.Run("pve"+ver, func(t *testing.T) {
			s := startSim(t, pvesim.Options{Guests: 3, DemoTemplates: true, Version: ver})
			c := tokenClient(s)
			ctx := ctxT(t)
			// nextid is a string, and go-proxmox decodes it
			if v := rawData(t, c, "/cluster/nextid"); v != "103" {
				t.Fatalf("nextid %#v", v)
			}
			cl, _ := c.Cluster(ctx)
			if id, err := cl.NextID(ctx); err != nil || id != 103 {
				t.Fatalf("NextID %d %v", id, err)
			}
			var ignored any
			errContains(t, c.Get(ctx, "/cluster/nextid?vmid=100", &ignored), `"vmid":"VM 100 already exists`)

			mem := rawData(t, c, "/nodes/pve1/qemu/100/config").(map[string]any)["memory"]
			if ver == "7" {
				if mem != float64(512) {
					t.Fatalf("PVE 7 memory %#v, want number", mem)
				}
			} else if mem != "512" {
				t.Fatalf("PVE %s memory %#v, want string", ver, mem)
			}
			cfg := rawData(t, c, "/nodes/pve1/qemu/9000/config").(map[string]any)
			if cfg["template"] != float64(1) || cfg["sockets"] != float64(1) {
				t.Fatalf("booleans and integers are numbers: %v", cfg)
			}
			// template: always 0/1 in resources, only when 1 in lists
			for _, r := range rawData(t, c, "/cluster/resources?type=vm").([]any) {
				m := r.(map[string]any)
				want := float64(0)
				if m["vmid"] == float64(9000) || m["vmid"] == float64(9001) {
					want = 1
				}
				if m["template"] != want {
					t.Fatalf("resources template for %v: %#v", m["vmid"], m["template"])
				}
			}
			for _, r := range rawData(t, c, "/nodes/pve1/qemu").([]any) {
				m := r.(map[string]any)
				_, has := m["template"]
				if has != (m["vmid"] == float64(9000)) {
					t.Fatalf("qemu list template key for %v: %v", m["vmid"], m["template"])
				}
			}
			st := rawData(t, c, "/nodes/pve1/qemu/100/status/current").(map[string]any)
			if _, has := st["template"]; has {
				t.Fatal("status/current has template for a non-template")
			}
			if st["ha"].(map[string]any)["managed"] != float64(0) {
				t.Fatalf("ha: %v", st["ha"])
			}
			rs, err := cl.Resources(ctx, "vm")
			if err != nil || len(rs) != 5 {
				t.Fatalf("Resources(vm): %d %v", len(rs), err)
			}
			_, err = cl.Resources(ctx, "bad")
			errContains(t, err, "value 'bad' does not have a value in the enumeration 'vm, storage, node, sdn'")
			all, err := cl.Resources(ctx)
			if err != nil || len(all) != 5+1+4 { // guests, node, storages
				t.Fatalf("Resources(): %d %v", len(all), err)
			}
			// cpulimit is a PVE "number": a string in config, and a fractional
			// maxcpu in resources, which go-proxmox's uint64 cannot decode
			// (the trap the adapter's own structs avoid).
			if err := c.Put(ctx, "/nodes/pve1/lxc/102/config", map[string]any{"cpulimit": 0.5}, nil); err != nil {
				t.Fatal(err)
			}
			if v := rawData(t, c, "/nodes/pve1/lxc/102/config").(map[string]any)["cpulimit"]; v != "0.5" {
				t.Fatalf("cpulimit %#v", v)
			}
			_, err = cl.Resources(ctx, "vm")
			errContains(t, err, "cannot unmarshal number 0.5")
		})
	}
}

func TestPendingAndHotplug(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	if err := s.AddGuest(pvesim.GuestSpec{VMID: 100, Name: "app", Cores: 2, MemoryMiB: 1024, Running: true}); err != nil {
		t.Fatal(err)
	}
	c := tokenClient(s)
	ctx := ctxT(t)
	n, _ := c.Node(ctx, "pve1")
	vm, _ := n.VirtualMachine(ctx, 100)
	// cores never hotplug; memory needs hotplug=memory + numa; description is fast-plug
	err := vm.ConfigSync(ctx,
		proxmox.VirtualMachineOption{Name: "cores", Value: 4},
		proxmox.VirtualMachineOption{Name: "memory", Value: "4096"},
		proxmox.VirtualMachineOption{Name: "description", Value: "hot"},
		proxmox.VirtualMachineOption{Name: "tags", Value: "Web,prod;web"})
	if err != nil {
		t.Fatal(err)
	}
	eff := rawData(t, c, "/nodes/pve1/qemu/100/config").(map[string]any)
	cur := rawData(t, c, "/nodes/pve1/qemu/100/config?current=1").(map[string]any)
	if eff["cores"] != float64(4) || cur["cores"] != float64(2) || cur["memory"] != "1024" || cur["description"] != "hot" {
		t.Fatalf("pending-applied %v vs current %v", eff, cur)
	}
	if cur["tags"] != "prod;web" {
		t.Fatalf("tags canonicalised: %q", cur["tags"])
	}
	pend, err := vm.Pending(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, p := range *pend {
		if p.Key == "cores" || p.Key == "memory" {
			found++
			if p.Pending == nil {
				t.Fatalf("pending entry without pending value: %+v", p)
			}
		}
	}
	if found != 2 {
		t.Fatalf("pending entries: %+v", *pend)
	}
	// status/current and maxmem reflect the applied config, not pending
	if st := rawData(t, c, "/nodes/pve1/qemu/100/status/current").(map[string]any); st["cpus"] != float64(2) {
		t.Fatalf("cpus before reboot %v", st["cpus"])
	}
	task, err := vm.Reboot(ctx)
	mustOK(t, s, task, err)
	g, _ := s.Guest(100)
	if g.Config["cores"] != "4" || g.Config["memory"] != "4096" || len(g.Pending) != 0 {
		t.Fatalf("after reboot: %+v", g)
	}
	// deleting a non-hotpluggable key on a running VM is a pending delete
	if err := vm.ConfigSync(ctx, proxmox.VirtualMachineOption{Name: "delete", Value: "cores"}); err != nil {
		t.Fatal(err)
	}
	if g, _ := s.Guest(100); len(g.PendingDelete) != 1 || g.Config["cores"] != "4" {
		t.Fatalf("pending delete: %+v", g)
	}
	// revert drops it
	if err := vm.ConfigSync(ctx, proxmox.VirtualMachineOption{Name: "revert", Value: "cores"}); err != nil {
		t.Fatal(err)
	}
	if g, _ := s.Guest(100); len(g.PendingDelete) != 0 {
		t.Fatalf("after revert: %+v", g)
	}
}

// TestAsyncConfigShapes covers the three shapes of a QEMU config write:
// a UPID (POST), null within background_delay (POST), null (PUT).
func TestAsyncConfigShapes(t *testing.T) {
	s := startSim(t, pvesim.Options{Guests: 1})
	c := tokenClient(s)
	ctx := ctxT(t)
	n, _ := c.Node(ctx, "pve1")
	vm, _ := n.VirtualMachine(ctx, 100)
	task, err := vm.Config(ctx, proxmox.VirtualMachineOption{Name: "onboot", Value: 1}, proxmox.VirtualMachineOption{Name: "background_delay", Value: 5})
	if err != nil || task != nil {
		t.Fatalf("background_delay: want (nil task, nil error), got %v %v", task, err)
	}
	if g, _ := s.Guest(100); g.Config["onboot"] != "1" {
		t.Fatalf("onboot %q", g.Config["onboot"])
	}
	// query parameters override the body, as in PVE
	res, _ := raw(t, "PUT", s.URL()+"/nodes/pve1/qemu/100/config?cores=3", tokenHdr(), "cores=2")
	if res.StatusCode != 200 {
		t.Fatal(res.Status)
	}
	if g, _ := s.Guest(100); g.Pending["cores"] != "3" {
		t.Fatalf("query should win (pending on a running VM): %+v", g.Pending)
	}
	// a delete of an unset key is a warning in the task, as on Proxmox
	task, err = vm.Config(ctx, proxmox.VirtualMachineOption{Name: "delete", Value: "balloon"})
	if err != nil {
		t.Fatal(err)
	}
	task = waitTask(t, s, task)
	if task.ExitStatus != "WARNINGS: 1" {
		t.Fatalf("exit %q", task.ExitStatus)
	}
	log, err := task.Log(ctx, 0, 50)
	if err != nil {
		t.Fatal(err)
	}
	if log[0] != "WARN: cannot delete 'balloon' - not set in current configuration!" || log[1] != "TASK WARNINGS: 1" {
		t.Fatalf("log %v", log)
	}
}

func TestTaskEndpoints(t *testing.T) {
	s := startSim(t, pvesim.Options{Guests: 2})
	c := tokenClient(s)
	ctx := ctxT(t)
	n, _ := c.Node(ctx, "pve1")
	vm, _ := n.VirtualMachine(ctx, 100)
	task, err := vm.Stop(ctx)
	mustOK(t, s, task, err)
	upid := string(task.UPID)
	if !strings.HasSuffix(upid, ":") || len(strings.Split(upid, ":")) != 9 {
		t.Fatalf("UPID format: %s", upid)
	}
	st := rawData(t, c, "/nodes/pve1/tasks/"+upid+"/status").(map[string]any)
	if st["upid"] != upid || st["node"] != "pve1" || st["status"] != "stopped" || st["exitstatus"] != "OK" || st["user"] != "root@pam" || st["tokenid"] != "converge" {
		t.Fatalf("status %v", st)
	}
	if _, has := st["endtime"]; has {
		t.Fatal("task status has no endtime on Proxmox")
	}
	res, body := raw(t, "GET", s.URL()+"/nodes/pve1/tasks/"+upid+"/log?start=0&limit=10", tokenHdr(), "")
	lines := body["data"].([]any)
	if res.StatusCode != 200 || body["total"] == nil || lines[len(lines)-1].(map[string]any)["t"] != "TASK OK" || lines[0].(map[string]any)["n"] != float64(1) {
		t.Fatalf("log %v", body)
	}
	var ignored any
	errContains(t, c.Get(ctx, "/nodes/pve1/tasks/UPID:pve1:00000001:00000001:00000001:qmstart:1:root@pam:/status", &ignored), `"upid":"no such task`)
	list := rawData(t, c, "/nodes/pve1/tasks?vmid=100").([]any)
	if len(list) != 1 || list[0].(map[string]any)["status"] != "OK" {
		t.Fatalf("node task list %v", list)
	}
}
