package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/pvesim"
)

// upEnv is a running `converge up --sim` process and how to reach it.
type upEnv struct {
	proc                     *proc
	natsURL, simURL, httpURL string
	tokenID, tokenSecret     string
	data                     string // up's --data
	js                       jetstream.JetStream
	nc                       *nats.Conn
}

func startUp(t *testing.T, guests int, extra ...string) *upEnv {
	t.Helper()
	natsAddr, simAddr, httpAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	e := &upEnv{natsURL: "nats://" + natsAddr, simURL: "http://" + simAddr, httpURL: "http://" + httpAddr,
		tokenID: "root@pam!e2e", tokenSecret: "e2e-secret-0000", data: t.TempDir()}
	args := append([]string{"up", "--sim", "--sim-guests", strconv.Itoa(guests), "--sim-nodes", "3",
		"--data", e.data, "--nats-listen", natsAddr, "--sim-listen", simAddr, "--http", httpAddr,
		"--sim-token", e.tokenID + "=" + e.tokenSecret, "--observe-interval", "200ms", "--config-refresh", "1s"}, extra...)
	// The CLI commands this test runs find up's NATS credentials there.
	t.Setenv("CONVERGE_DATA", e.data)
	e.proc = startProc(t, "up", args...)
	e.proc.ready(t, 90*time.Second, e.httpURL+"/readyz")
	nc, err := natsConnect(t, e.natsURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	e.nc = nc
	e.js, _ = jetstream.New(nc)
	return e
}

// publish sends a desired event the way any NATS client can: raw JSON on
// the documented subject.
func (e *upEnv) publish(t *testing.T, vmid int, body string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ack, err := e.js.Publish(ctx, "pve.desired.pve."+strconv.Itoa(vmid), []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

// api calls the HTTP API with the admin token `up` generated in its data
// directory.
func (e *upEnv) api(t *testing.T, method, path, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, e.httpURL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+httpToken(t, e.data))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// httpToken is the admin token of the HTTP API `up` keeps in data.
func httpToken(t *testing.T, data string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(data, "http-tokens.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Tokens []struct{ Name, Token string } `json:"tokens"`
	}
	if err := yaml.Unmarshal(raw, &f); err != nil || len(f.Tokens) == 0 || f.Tokens[0].Name != "admin" {
		t.Fatalf("http-tokens.yaml: %v\n%s", err, raw)
	}
	return f.Tokens[0].Token
}

func (e *upEnv) simGuests(t *testing.T) map[int]pvesim.GuestInfo {
	t.Helper()
	res, err := http.Get(e.simURL + "/_sim/guests")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var gs []pvesim.GuestInfo
	if err := json.NewDecoder(res.Body).Decode(&gs); err != nil {
		t.Fatal(err)
	}
	out := map[int]pvesim.GuestInfo{}
	for _, g := range gs {
		out[g.VMID] = g
	}
	return out
}

func (e *upEnv) simTasks(t *testing.T) []map[string]any {
	t.Helper()
	req, _ := http.NewRequest("GET", e.simURL+"/api2/json/cluster/tasks", nil)
	req.Header.Set("Authorization", "PVEAPIToken="+e.tokenID+"="+e.tokenSecret)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body struct {
		Data []map[string]any `json:"data"`
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return body.Data
}

func (e *upEnv) pveClient(t *testing.T) *pve.Client {
	t.Helper()
	pc := pve.DefaultConfig()
	pc.URL, pc.TokenID, pc.TokenSecret = e.simURL, e.tokenID, e.tokenSecret
	c, err := pve.New(pc)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type statusOut struct {
	Planner *struct {
		State struct {
			Reachable bool   `json:"reachable"`
			Error     string `json:"error"`
		} `json:"state"`
	} `json:"planner"`
	Guests []struct {
		VMID     int    `json:"vmid"`
		State    string `json:"state"`
		Reason   string `json:"reason"`
		Revision uint64 `json:"desired_revision"`
		Observed *struct {
			Node   string `json:"node"`
			Status string `json:"status"`
		} `json:"observed"`
		Last *struct {
			Op     string `json:"op"`
			Result string `json:"result"`
			UPID   string `json:"upid"`
		} `json:"last_action"`
	} `json:"guests"`
}

func (e *upEnv) status(t *testing.T, ids ...int) statusOut {
	t.Helper()
	args := []string{"status", "--nats", e.natsURL, "-o", "json"}
	for _, id := range ids {
		args = append(args, strconv.Itoa(id))
	}
	// stdout alone: stderr carries the logs (JSON off a terminal).
	out, errOut, code := runSplit(t, args...)
	if code == 2 && strings.Contains(out+errOut, "no view of guest") {
		return statusOut{} // not materialised yet: callers poll
	}
	if code != 0 {
		t.Fatalf("status exited %d: %s%s", code, out, errOut)
	}
	var s statusOut
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("status output: %v\n%s", err, out)
	}
	return s
}

func (e *upEnv) wait(t *testing.T, ids []int) {
	t.Helper()
	args := []string{"wait", "--nats", e.natsURL, "--timeout", "2m"}
	for _, id := range ids {
		args = append(args, strconv.Itoa(id))
	}
	if out, code := runCLI(t, args...); code != 0 {
		t.Fatalf("converge wait exited %d: %s", code, out)
	}
}

type want struct {
	power       string
	cores, mem  int
	description string
	tags        string // as Proxmox stores them
}

// desiredJSON allows a restart: these guests' owners accept the reboot
// that applies cores on a running VM (the default, never, is pinned by
// internal/app's restart tests).
func desiredJSON(vmid int, w want) string {
	return fmt.Sprintf(`{"vmid":%d,"power":%q,"cores":%d,"memory_mib":%d,"description":%q,"tags":["CONVERGE","%s"],"restart":"allowed"}`,
		vmid, w.power, w.cores, w.mem, w.description+"\n", strings.Split(w.tags, ";")[1])
}

func checkSim(t *testing.T, gs map[int]pvesim.GuestInfo, vmid int, w want) string {
	g := gs[vmid]
	eff := map[string]string{}
	for k, v := range g.Config {
		eff[k] = v
	}
	for k, v := range g.Pending {
		eff[k] = v
	}
	switch {
	case g.Status != w.power:
		return fmt.Sprintf("%d: power %s, want %s", vmid, g.Status, w.power)
	case g.Config["cores"] != strconv.Itoa(w.cores) || len(g.Pending) > 0:
		return fmt.Sprintf("%d: cores %s (pending %v), want %d applied", vmid, g.Config["cores"], g.Pending, w.cores)
	case g.Config["memory"] != strconv.Itoa(w.mem):
		return fmt.Sprintf("%d: memory %s, want %d", vmid, g.Config["memory"], w.mem)
	case strings.TrimRight(g.Config["description"], "\n ") != w.description:
		return fmt.Sprintf("%d: description %q, want %q", vmid, g.Config["description"], w.description)
	case g.Config["tags"] != w.tags:
		return fmt.Sprintf("%d: tags %q, want %q", vmid, g.Config["tags"], w.tags)
	}
	return ""
}

// TestUpConvergesFiftyGuests is the end-to-end test of issue 3: a real
// `converge up --sim` process, 50 guests driven by desired events from a
// plain NATS client, changes of power, cores, memory, description and
// tags, drift made behind converge's back through the simulator's Proxmox
// API, and `converge wait` and `status` reporting it. Guests without
// desired state (150, 151 and the templates) must never be touched.
func TestUpConvergesFiftyGuests(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	start := time.Now()
	phase := func(name string) { t.Logf("%6.2fs %s", time.Since(start).Seconds(), name) }
	// A fleet change that stops and reboots dozens of guests: the
	// mass-change guard would hold all but five (TestSafetyCommands pins
	// that); this test is about converging them.
	e := startUp(t, 52, "--guard-share", "1")
	phase("up is ready")
	ids := make([]int, 0, 50)
	wants := map[int]want{}
	for vmid := 100; vmid < 150; vmid++ {
		w := want{power: "running", cores: 2, mem: 1024, description: "managed by converge", tags: "converge;e2e"}
		if vmid%4 == 3 {
			w.power = "stopped"
		}
		wants[vmid] = w
		ids = append(ids, vmid)
		e.publish(t, vmid, desiredJSON(vmid, w))
	}
	phase("50 desired events published")
	e.wait(t, ids)
	phase("round 1 converged")
	gs := e.simGuests(t)
	for _, id := range ids {
		if msg := checkSim(t, gs, id, wants[id]); msg != "" {
			t.Fatalf("after wait, Proxmox disagrees: %s", msg)
		}
	}
	st := e.status(t)
	states := map[int]string{}
	for _, g := range st.Guests {
		states[g.VMID] = g.State
	}
	for _, id := range ids {
		if states[id] != "converged" {
			t.Fatalf("status of %d: %q", id, states[id])
		}
	}
	if states[150] != "unmanaged" || states[151] != "unmanaged" {
		t.Fatalf("guests without desired state: 150=%q 151=%q", states[150], states[151])
	}

	// Round 2: power flips and config changes on running and stopped guests.
	for vmid := 100; vmid < 120; vmid++ {
		w := wants[vmid]
		switch vmid % 4 {
		case 0:
			w.power = map[string]string{"running": "stopped", "stopped": "running"}[w.power]
		case 1:
			w.cores, w.mem = 3, 2048 // on running QEMU guests this needs a reboot
		case 2:
			w.description, w.tags = "second revision", "converge;round2"
		case 3:
			w.power, w.cores = "running", 4
		}
		wants[vmid] = w
		e.publish(t, vmid, strings.Replace(desiredJSON(vmid, w), `"E2E"`, `"e2e"`, 1))
	}
	phase("round 2 published")
	e.wait(t, ids)
	phase("round 2 converged")
	gs = e.simGuests(t)
	for _, id := range ids {
		if msg := checkSim(t, gs, id, wants[id]); msg != "" {
			t.Fatalf("round 2, Proxmox disagrees: %s", msg)
		}
	}

	// Drift behind converge's back, through the Proxmox API: stop a guest
	// desired running, rewrite a description and tags (invisible in
	// /cluster/resources), change memory of a stopped guest.
	px := e.pveClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ref := func(vmid int) pve.GuestRef {
		g := gs[vmid]
		return pve.GuestRef{Kind: pve.Kind(g.Kind), Node: g.Node, VMID: vmid}
	}
	if wants[121].power != "running" || wants[123].power != "stopped" {
		t.Fatalf("test setup: 121 should be desired running, 123 stopped")
	}
	if _, err := px.Stop(ctx, ref(121)); err != nil {
		t.Fatal(err)
	}
	if _, err := px.UpdateConfig(ctx, ref(122), pve.ConfigChange{Set: map[string]string{"description": "edited by hand", "tags": "handmade"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := px.UpdateConfig(ctx, ref(123), pve.ConfigChange{Set: map[string]string{"memory": "4096"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "drift on 121, 122 and 123 corrected in Proxmox", func() bool {
		gs = e.simGuests(t)
		return checkSim(t, gs, 121, wants[121]) == "" && checkSim(t, gs, 122, wants[122]) == "" && checkSim(t, gs, 123, wants[123]) == ""
	})
	phase("drift corrected in Proxmox")
	e.wait(t, []int{121, 122, 123})
	wantOps := map[int]string{121: "start", 122: "set_config", 123: "set_config"}
	// Views are materialised on the planner's tick: poll until they show
	// the corrections.
	eventually(t, 30*time.Second, "status showing the drift corrections", func() bool {
		st = e.status(t, 121, 122, 123)
		for _, g := range st.Guests {
			if g.State != "converged" || g.Last == nil || g.Last.Op != wantOps[g.VMID] || g.Last.Result != "succeeded" {
				return false
			}
		}
		return len(st.Guests) == 3
	})
	out, code := runCLI(t, "status", "--nats", e.natsURL, "121")
	if code != 0 || !contains(out, "121", "converged", "start:succeeded") {
		t.Fatalf("status text: %d\n%s", code, out)
	}

	phase("status checked")

	// Invalid desired events are rejected with the reason in status; the
	// pipeline keeps going.
	for _, tc := range []struct{ body, reason string }{
		{`{"vmid":150,"cores":`, "not valid JSON"},
		{`{"vmid":150,"cores":2,"colour":"red"}`, "colour"},
		{`{"vmid":150,"cores":"two"}`, "cores:"},
		{`{"vmid":151,"cores":2}`, "body says 151 but the subject is for 150"},
		{`{"vmid":150,"memory_mib":1}`, "memory_mib:"},
	} {
		seq := e.publish(t, 150, tc.body)
		eventually(t, 30*time.Second, "rejection of "+tc.body, func() bool {
			st := e.status(t, 150)
			return len(st.Guests) == 1 && st.Guests[0].State == "rejected" && strings.Contains(st.Guests[0].Reason, fmt.Sprintf("#%d", seq)) &&
				strings.Contains(st.Guests[0].Reason, tc.reason)
		})
	}
	phase("invalid desired events rejected")

	// The HTTP API: the same validation (400, nothing published), then a
	// valid desired state that converges.
	res := e.api(t, "POST", "/v1/desired/150", `{"vmid":150,"power":"on"}`)
	var prob struct {
		Problems []struct{ Field, Message string } `json:"problems"`
	}
	_ = json.NewDecoder(res.Body).Decode(&prob)
	res.Body.Close()
	if res.StatusCode != 400 || len(prob.Problems) != 1 || prob.Problems[0].Field != "power" {
		t.Fatalf("invalid POST: %d %+v", res.StatusCode, prob)
	}
	// Without a token nothing is accepted.
	if res, err := http.Post(e.httpURL+"/v1/desired/150", "application/json", strings.NewReader(`{"vmid":150}`)); err != nil || res.StatusCode != 401 {
		t.Fatalf("POST without a token: %v %v", res, err)
	}
	res = e.api(t, "POST", "/v1/desired/150", `{"vmid":150,"power":"running","cores":2}`)
	if res.StatusCode != 202 {
		t.Fatalf("valid POST: %v", res)
	}
	res.Body.Close()
	wants[150] = want{}
	e.wait(t, []int{150})
	res = e.api(t, "GET", "/v1/guests/150", "")
	var g150 struct {
		State, Publisher string
	}
	_ = json.NewDecoder(res.Body).Decode(&g150)
	res.Body.Close()
	if g150.State != "converged" || g150.Publisher != "token:admin" {
		t.Fatalf("GET /v1/guests/150: %+v", g150)
	}
	phase("HTTP API checked")

	// Invariant 7: no task ever touched a guest without desired state.
	for _, task := range e.simTasks(t) {
		id, _ := strconv.Atoi(fmt.Sprint(task["id"]))
		if _, managed := wants[id]; !managed {
			t.Fatalf("a guest without desired state was touched: %v", task)
		}
	}
	// Invariants 1 and 4 from the journal; every accepted desired revision
	// was folded by the planner.
	desired, actions := auditJournal(t, e.js)
	st = e.status(t)
	for _, g := range st.Guests {
		if rev, ok := desired[g.VMID]; ok && g.Revision != rev && g.State != "rejected" {
			t.Fatalf("guest %d: view at desired revision %d, journal has %d", g.VMID, g.Revision, rev)
		}
	}
	t.Logf("journal audit: %d actions, each with one final result, one at a time per guest", actions)
}
