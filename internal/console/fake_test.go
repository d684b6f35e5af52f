package console_test

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/audit"
	"github.com/converge-pve/converge/internal/console"
	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
)

// fakeSummary is a guest as the /v1 contract of issue 40 shows it: the
// views' summary and what approval it awaits.
type fakeSummary struct {
	views.Summary
	AwaitsApproval string `json:"awaits_approval,omitempty"`
}

// fake serves the console and a small in-memory model of /v1 as issue
// 40 specifies it (whoami, guests, stream, timeline, desired, approve,
// pause, resume, release), so that the console's script is exercised
// without a running converge. It is not converge: held guests are held
// because the test says so, and an approval stops them at once.
type fake struct {
	mu       sync.Mutex
	guests   map[int]*fakeSummary
	timeline map[int][]audit.Entry
	seq      uint64
	subs     map[chan fakeSummary]bool
	tokens   map[string][2]string // token: name, scope
	srv      *httptest.Server
}

func newFake(t *testing.T, n int, tokens map[string][2]string) *fake {
	f := &fake{guests: map[int]*fakeSummary{}, timeline: map[int][]audit.Entry{}, subs: map[chan fakeSummary]bool{}, tokens: tokens}
	at := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	for i := range n {
		vmid := 100 + i
		kind, status := events.QEMU, "running"
		if i%3 == 2 {
			kind, status = events.LXC, "stopped"
		}
		g := &fakeSummary{Summary: views.Summary{VMID: vmid, Cluster: "pve", State: planner.Unmanaged, Reason: "no desired state",
			Observed: &views.ObservedSummary{Exists: true, Node: fmt.Sprintf("pve%d", i%3+1), Kind: kind, Status: status,
				Config: events.GuestConfig{Name: fmt.Sprintf("demo-%d", vmid), Tags: []string{[]string{"web", "db", "batch"}[i%3]}, Cores: 2, MemoryMiB: 2048}, ReadAt: at},
			UpdatedAt: at}}
		if kind == events.QEMU { // as long as Proxmox's NIC strings get
			g.Observed.Config.Net = map[string]string{"net0": fmt.Sprintf("virtio=BC:24:11:00:%02X:%02X,bridge=vmbr0,firewall=1,mtu=9000,queues=4,tag=100", i/256, i%256)}
		}
		f.guests[vmid] = g
		f.journal(vmid, audit.Entry{Kind: events.KindObserved, Who: "observer", Summary: "observed " + status + " on " + g.Observed.Node})
	}
	mux := http.NewServeMux()
	ui := console.Handler()
	mux.Handle("GET /{$}", ui)
	mux.Handle("GET /assets/", ui)
	mux.HandleFunc("GET /v1/whoami", f.auth(false, func(w http.ResponseWriter, r *http.Request, who [2]string) {
		writeJSON(w, 200, map[string]string{"name": who[0], "scope": who[1], "cluster": "pve"})
	}))
	mux.HandleFunc("GET /v1/guests", f.auth(false, func(w http.ResponseWriter, r *http.Request, _ [2]string) {
		writeJSON(w, 200, map[string]any{"cluster": "pve", "guests": f.list()})
	}))
	mux.HandleFunc("GET /v1/guests/{vmid}", f.auth(false, f.guest))
	mux.HandleFunc("GET /v1/guests/{vmid}/timeline", f.auth(false, f.history))
	mux.HandleFunc("GET /v1/stream", f.auth(false, f.stream))
	mux.HandleFunc("POST /v1/desired/{vmid}", f.auth(true, f.desired))
	for _, c := range []string{"approve", "pause", "resume", "release"} {
		mux.HandleFunc("POST /v1/"+c, f.auth(true, func(w http.ResponseWriter, r *http.Request, who [2]string) { f.operate(w, r, who, c) }))
	}
	f.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		f.mu.Lock()
		for c := range f.subs {
			close(c)
			delete(f.subs, c)
		}
		f.mu.Unlock()
		f.srv.CloseClientConnections() // a failed test's tab may hold a stream still
		f.srv.Close()
	})
	return f
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// auth is the Guard's rules that the console meets: bearer token, scope,
// JSON bodies.
func (f *fake) auth(write bool, next func(http.ResponseWriter, *http.Request, [2]string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		who, ok := f.tokens[tok]
		if !ok {
			writeJSON(w, 401, map[string]string{"error": "unknown token"})
			return
		}
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); write && mt != "application/json" {
			writeJSON(w, 415, map[string]string{"error": "the body must be application/json"})
			return
		}
		if write && who[1] != "write" {
			writeJSON(w, 403, map[string]string{"error": "token " + who[0] + " may only read"})
			return
		}
		next(w, r, who)
	}
}

func (f *fake) list() []fakeSummary {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]fakeSummary, 0, len(f.guests))
	for _, g := range f.guests {
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b fakeSummary) int { return a.VMID - b.VMID })
	return out
}

// journal appends an entry to a guest's timeline; f.mu is held or not
// yet shared.
func (f *fake) journal(vmid int, e audit.Entry) uint64 {
	f.seq++
	e.VMID, e.Cluster, e.Seq, e.Time = vmid, "pve", f.seq, time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC).Add(time.Duration(f.seq)*time.Second)
	f.timeline[vmid] = append(f.timeline[vmid], e)
	return f.seq
}

// change applies fn to a guest and sends its new summary to every stream.
func (f *fake) change(vmid int, fn func(g *fakeSummary)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := f.guests[vmid]
	fn(g)
	g.UpdatedAt = g.UpdatedAt.Add(time.Second)
	for c := range f.subs {
		c <- *g
	}
}

// hold makes a running guest's stop wait for the mass-change guard.
func (f *fake) hold(vmid int) {
	f.change(vmid, func(g *fakeSummary) {
		power := events.PowerStopped
		g.Desired, g.Publisher, g.State, g.AwaitsApproval = &events.Desired{VMID: vmid, Power: &power}, "token:ops", planner.Held, "guard"
		g.Reason = fmt.Sprintf("mass-change guard: shutdown waits for approval (converge approve %d, or --all)", vmid)
		g.Next = []planner.Step{{Op: events.OpHold, Holds: events.OpShutdown, Reason: g.Reason}}
		g.Drift = []string{"power: want stopped, have running"}
		g.Revision = f.journal(vmid, audit.Entry{Kind: events.KindDesired, Who: "token:ops", Summary: "desired power stopped", Desired: g.Desired})
	})
}

func (f *fake) guest(w http.ResponseWriter, r *http.Request, _ [2]string) {
	vmid, _ := strconv.Atoi(r.PathValue("vmid"))
	f.mu.Lock()
	g, ok := f.guests[vmid]
	f.mu.Unlock()
	if !ok {
		writeJSON(w, 404, map[string]string{"error": "converge has no view of guest " + r.PathValue("vmid")})
		return
	}
	writeJSON(w, 200, g)
}

func (f *fake) history(w http.ResponseWriter, r *http.Request, _ [2]string) {
	vmid, _ := strconv.Atoi(r.PathValue("vmid"))
	before, _ := strconv.ParseUint(r.URL.Query().Get("before"), 10, 64)
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []audit.Entry
	var next uint64
	all := f.timeline[vmid]
	for i := len(all) - 1; i >= 0; i-- {
		if before != 0 && all[i].Seq >= before {
			continue
		}
		if limit > 0 && len(out) == limit {
			next = out[len(out)-1].Seq
			break
		}
		out = append(out, all[i])
	}
	writeJSON(w, 200, map[string]any{"vmid": vmid, "cluster": "pve", "entries": out, "next_before": next})
}

func (f *fake) stream(w http.ResponseWriter, r *http.Request, who [2]string) {
	c := make(chan fakeSummary, 256)
	f.mu.Lock()
	f.subs[c] = true
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		if f.subs[c] {
			delete(f.subs, c)
			close(c)
		}
		f.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	_ = enc.Encode(map[string]string{"type": "hello", "cluster": "pve", "who": who[0], "scope": who[1]})
	for _, g := range f.list() {
		_ = enc.Encode(map[string]any{"type": "guest", "guest": g})
	}
	_ = enc.Encode(map[string]string{"type": "synced"})
	w.(http.Flusher).Flush()
	for {
		select {
		case <-r.Context().Done():
			return
		case g, ok := <-c:
			if !ok {
				return
			}
			_ = enc.Encode(map[string]any{"type": "guest", "guest": g})
			w.(http.Flusher).Flush()
		}
	}
}

func (f *fake) desired(w http.ResponseWriter, r *http.Request, who [2]string) {
	vmid, _ := strconv.Atoi(r.PathValue("vmid"))
	var d events.Desired
	if err := json.NewDecoder(r.Body).Decode(&d); err != nil {
		writeJSON(w, 400, map[string]string{"error": err.Error()})
		return
	}
	var seq uint64
	f.change(vmid, func(g *fakeSummary) {
		seq = f.journal(vmid, audit.Entry{Kind: events.KindDesired, Who: "token:" + who[0], Summary: "desired state published", Desired: &d})
		g.Desired, g.Revision, g.Publisher, g.State, g.Reason = &d, seq, "token:"+who[0], planner.Converged, ""
		if d.Name != nil {
			g.Observed.Config.Name = *d.Name
		}
		if d.Tags != nil {
			g.Observed.Config.Tags = *d.Tags
		}
		if d.Description != nil {
			g.Observed.Config.Description = *d.Description
		}
	})
	writeJSON(w, 202, map[string]any{"vmid": vmid, "seq": seq})
}

func (f *fake) operate(w http.ResponseWriter, r *http.Request, who [2]string, command string) {
	var b struct {
		VMIDs  []int  `json:"vmids"`
		Reason string `json:"reason"`
	}
	if err := json.NewDecoder(r.Body).Decode(&b); err != nil || len(b.VMIDs) == 0 {
		writeJSON(w, 400, map[string]string{"error": fmt.Sprintf("want {\"vmids\": [...]}: %v", err)})
		return
	}
	var seq uint64
	for _, vmid := range b.VMIDs {
		f.change(vmid, func(g *fakeSummary) {
			seq = f.journal(vmid, audit.Entry{Kind: events.KindControl, Who: "token:" + who[0],
				Summary: fmt.Sprintf("%s by token:%s: %s", command, who[0], b.Reason)})
			switch command {
			case "approve":
				g.State, g.Reason, g.AwaitsApproval, g.Next, g.Drift = planner.Converged, "", "", nil, nil
				g.Observed.Status = "stopped"
				g.Last = &views.ActionSummary{ID: "a1", Op: events.OpShutdown, Reason: "power: want stopped", Result: events.ResultSucceeded,
					UPID: fmt.Sprintf("UPID:%s:0001:shutdown:%d:root@pam:", g.Observed.Node, vmid)}
				f.journal(vmid, audit.Entry{Kind: events.KindResult, Who: "executor", TaskID: g.Last.UPID, Summary: "shutdown succeeded"})
			case "pause":
				g.State = planner.Paused
			case "resume":
				g.State = planner.Converged
			case "release":
				g.State, g.Desired = planner.Unmanaged, nil
			}
		})
	}
	writeJSON(w, 202, map[string]any{"command": command, "vmids": b.VMIDs, "cluster": "pve", "seq": seq, "by": "token:" + who[0]})
}
