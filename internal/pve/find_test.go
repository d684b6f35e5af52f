package pve

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
)

func TestTaskTypes(t *testing.T) {
	for _, tc := range []struct {
		kind Kind
		op   Op
		want []string
	}{
		{KindQEMU, OpStart, []string{"qmstart", "hastart"}},
		{KindLXC, OpStart, []string{"vzstart", "hastart"}},
		{KindQEMU, OpStop, []string{"qmstop", "hastop"}},
		{KindLXC, OpStop, []string{"vzstop", "hastop"}},
		{KindQEMU, OpShutdown, []string{"qmshutdown", "hastop"}},
		{KindLXC, OpShutdown, []string{"vzshutdown", "hastop"}},
		{KindQEMU, OpReboot, []string{"qmreboot"}},
		{KindLXC, OpReboot, []string{"vzreboot"}},
		{KindQEMU, OpUpdateConfig, []string{"qmconfig"}},
		{KindLXC, OpUpdateConfig, nil}, // synchronous PUT: no task
		{KindQEMU, OpClone, []string{"qmclone"}},
		{KindLXC, OpClone, []string{"vzclone"}},
		{KindQEMU, OpDelete, []string{"qmdestroy"}},
		{KindLXC, OpDelete, []string{"vzdestroy"}},
		{KindQEMU, OpSnapshot, []string{"qmsnapshot"}},
		{KindLXC, OpSnapshot, []string{"vzsnapshot"}},
		{KindQEMU, OpDeleteSnapshot, []string{"qmdelsnapshot"}},
		{KindLXC, OpDeleteSnapshot, []string{"vzdelsnapshot"}},
		{KindQEMU, OpReadConfig, nil},
		{KindQEMU, OpUnknown, nil},
		{Kind("openvz"), OpStart, nil},
	} {
		got := TaskTypes(tc.kind, tc.op)
		if !slices.Equal(got, tc.want) {
			t.Errorf("TaskTypes(%s, %q) = %v, want %v", tc.kind, tc.op, got, tc.want)
		}
		// Every type maps back to the operation (hastop reads as a stop),
		// and to the guest's kind unless it is an HA task.
		for _, typ := range got {
			u := UPID{Type: typ, ID: "100", Node: "pve"}
			want := tc.op
			if typ == "hastop" {
				want = OpStop
			}
			if u.Op() != want {
				t.Errorf("%s reads as %q, want %q", typ, u.Op(), want)
			}
			if k := u.Ref().Kind; k != "" && k != tc.kind {
				t.Errorf("%s reads as kind %q, want %q", typ, k, tc.kind)
			}
		}
	}
}

// upidAt renders a UPID on node pve started at the unix second start.
func upidAt(typ, id string, start int64, pstart uint64) string {
	return upidOn("pve", typ, id, start, pstart)
}

func upidOn(node, typ, id string, start int64, pstart uint64) string {
	return fmt.Sprintf("UPID:%s:%08X:%08X:%08X:%s:%s:root@pam!converge:", node, 0x1000+pstart, pstart, start, typ, id)
}

// taskListRoute serves GET /nodes/pve/tasks from entries per typefilter,
// ignoring every other filter (so the client's own checks are exercised).
func (f *fakePVE) taskListRoute(byType map[string][]string) {
	f.on(http.MethodGet, "/nodes/pve/tasks", func(w http.ResponseWriter, r *http.Request) {
		items := []map[string]any{}
		for _, upid := range byType[r.URL.Query().Get("typefilter")] {
			items = append(items, map[string]any{"upid": upid, "status": "OK"})
		}
		b, _ := json.Marshal(items)
		writeData(w, string(b))
	})
}

func TestFindTaskPicksNewestMatch(t *testing.T) {
	f := newFake(t)
	c := f.client(t)
	ref := GuestRef{Kind: KindQEMU, Node: "pve", VMID: 100}
	const since = int64(1767225600) // the action's second
	want := upidAt("hastart", "100", since+5, 300)
	f.taskListRoute(map[string][]string{
		"qmstart": {
			upidAt("qmstart", "100", since+5, 200),         // same second, older worker
			upidAt("qmstart", "101", since+9, 900),         // another guest
			upidAt("qmstop", "100", since+9, 901),          // another type
			upidAt("qmstart", "100", since-1, 902),         // before since
			"UPID:pve:garbage",                             // unparsable: skipped
			upidOn("pve2", "qmstart", "100", since+9, 903), // another node
			upidAt("qmstart", "100", since, 100),
		},
		"hastart": {want},
	})
	// Sub-second parts of since do not count: PVE's start times are seconds.
	tr, found, err := c.FindTask(bg, ref, OpStart, time.Unix(since, 999_000_000))
	if err != nil || !found || tr.UPID != want || tr.Node != "pve" {
		t.Fatalf("FindTask = %+v, %v, %v; want %s", tr, found, err, want)
	}
	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want one per task type", len(reqs))
	}
	for i, typ := range []string{"qmstart", "hastart"} {
		q := reqs[i].Query
		if reqs[i].Method != http.MethodGet || q.Get("typefilter") != typ || q.Get("vmid") != "100" ||
			q.Get("source") != "all" || q.Get("since") != fmt.Sprint(since) || q.Get("limit") != "50" {
			t.Errorf("request %d: %s %s", i, reqs[i].Method, reqs[i].RequestURI)
		}
	}
}

func TestFindTaskNone(t *testing.T) {
	f := newFake(t)
	c := f.client(t)
	f.taskListRoute(map[string][]string{"qmreboot": {upidAt("qmreboot", "100", 1000, 1)}})
	ref := GuestRef{Kind: KindQEMU, Node: "pve", VMID: 100}

	tr, found, err := c.FindTask(bg, ref, OpStop, time.Unix(1767225600, 0))
	if err != nil || found || !tr.IsZero() {
		t.Fatalf("no task: %+v, %v, %v", tr, found, err)
	}
	// A task older than since is not found; a zero since means any time
	// and sends none.
	if _, found, err := c.FindTask(bg, ref, OpReboot, time.Unix(1001, 0)); err != nil || found {
		t.Fatalf("task before since: %v, %v", found, err)
	}
	tr, found, err = c.FindTask(bg, ref, OpReboot, time.Time{})
	if err != nil || !found || tr.UPID != upidAt("qmreboot", "100", 1000, 1) {
		t.Fatalf("zero since: %+v, %v, %v", tr, found, err)
	}
	if q := f.last().Query; q.Has("since") {
		t.Fatalf("zero since sent since=%s", q.Get("since"))
	}

	// An LXC config write has no task: nothing to find, nothing asked.
	n := len(f.requests())
	ct := GuestRef{Kind: KindLXC, Node: "pve", VMID: 200}
	if tr, found, err := c.FindTask(bg, ct, OpUpdateConfig, time.Unix(1000, 0)); err != nil || found || !tr.IsZero() {
		t.Fatalf("lxc config: %+v, %v, %v", tr, found, err)
	}
	// Misuse is terminal and asks nothing either.
	for _, tc := range []struct {
		ref GuestRef
		op  Op
	}{{ref, OpReadConfig}, {ref, OpUnknown}, {GuestRef{Kind: KindQEMU, Node: "bad/node", VMID: 100}, OpStart}, {GuestRef{Kind: KindQEMU, Node: "pve", VMID: 5}, OpStart}} {
		_, _, err := c.FindTask(bg, tc.ref, tc.op, time.Unix(1000, 0))
		if e := asError(t, err); e.Class != ClassTerminal || e.Op != OpTaskList {
			t.Errorf("FindTask(%v, %q): %v, want a terminal task-list error", tc.ref, tc.op, err)
		}
	}
	if len(f.requests()) != n {
		t.Fatalf("requests sent for an op without tasks or a bad ref: %d", len(f.requests())-n)
	}
}

func TestFindTaskErrors(t *testing.T) {
	ref := GuestRef{Kind: KindQEMU, Node: "pve", VMID: 100}
	since := time.Unix(1767225600, 0)
	for _, tc := range []struct {
		name  string
		serve http.HandlerFunc
		want  Class
	}{
		{"node offline", func(w http.ResponseWriter, _ *http.Request) {
			pveError(w, 595, "no route to host")
		}, ClassTransient},
		{"gateway", func(w http.ResponseWriter, _ *http.Request) { pveError(w, 502, "Bad Gateway") }, ClassTransient},
		{"connection dropped", dropConnection, ClassTransient},
		{"permission", func(w http.ResponseWriter, _ *http.Request) {
			pveError(w, 403, "Permission check failed (/nodes/pve, Sys.Audit)")
		}, ClassUnauthorized},
		{"not a list", func(w http.ResponseWriter, _ *http.Request) { writeData(w, `{"upid":1}`) }, ClassUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			f.on(http.MethodGet, "/nodes/pve/tasks", tc.serve)
			_, found, err := f.client(t).FindTask(bg, ref, OpStart, since)
			e := asError(t, err)
			if found || e.Class != tc.want || e.Op != OpTaskList || e.Indeterminate {
				t.Fatalf("found %v, err %v (class %v), want %v", found, err, e.Class, tc.want)
			}
		})
	}

	// Proxmox not listening at all.
	f := newFake(t)
	c := f.client(t)
	f.srv.Close()
	_, found, err := c.FindTask(bg, ref, OpStart, since)
	if e := asError(t, err); found || e.Class != ClassTransient {
		t.Fatalf("unreachable: %v", err)
	}
}
