package views_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
	"github.com/converge-pve/converge/projector"
)

const upid = "UPID:pve1:00001234:0000ABCD:65E1F000:qmstart:101:root@pam:"

func TestSummarise(t *testing.T) {
	desired := &events.Desired{VMID: 101, Power: ptr(events.PowerRunning), Cores: ptr(4)}
	obs := &events.Observed{VMID: 101, Cluster: "pve", Exists: true, Node: "pve1", Kind: events.QEMU, Status: "stopped",
		Lock: "backup", Config: events.GuestConfig{Name: "web", Cores: 2, MemoryMiB: 2048, Tags: []string{"prod"}},
		Pending: map[string]string{"cores": "4"}, ReadAt: t0, Digest: "abc"}
	act := &events.Action{Meta: events.NewMeta("planner", "c", t0.Add(time.Second)), ID: "pve-101-5-1", VMID: 101, Cluster: "pve",
		Op: events.OpStart, Reason: "desired running, observed stopped", DesiredSeq: 5}
	base := func() *projector.View {
		return &projector.View{VMID: 101, Cluster: "pve", Desired: desired, DesiredSeq: 5, DesiredAt: t0, Publisher: "billing",
			Observed: obs, ObservedSeq: 6, LastAction: act, LastActionSeq: 7, Seq: 7}
	}

	cases := []struct {
		name string
		doc  func() views.GuestDoc
		want *views.ActionSummary
		also func(t *testing.T, s views.Summary)
	}{
		{"in flight, started", func() views.GuestDoc {
			v := base()
			v.InFlight, v.InFlightSeq = act, 7
			v.Started = &events.Result{ActionID: act.ID, Status: events.ResultStarted, UPID: upid}
			// An older action's result must not be shown as this one's.
			v.LastResult = &events.Result{ActionID: "pve-101-4-1", Status: events.ResultFailed, Error: "old"}
			return views.GuestDoc{View: v, Status: planner.Status{Kind: planner.Acting, Reason: "start: desired running (task " + upid + ")"},
				Next: []planner.Step{{Op: events.OpSetConfig, Reason: "cores 2 → 4"}}, UpdatedAt: t0.Add(2 * time.Second)}
		}, &views.ActionSummary{ID: act.ID, Op: events.OpStart, Reason: act.Reason, Result: events.ResultStarted, UPID: upid, At: act.Time},
			func(t *testing.T, s views.Summary) {
				if s.State != planner.Acting || !strings.Contains(s.Reason, upid) {
					t.Errorf("state %s reason %q", s.State, s.Reason)
				}
				if len(s.Next) != 1 || s.Next[0].Op != events.OpSetConfig {
					t.Errorf("next %+v", s.Next)
				}
			}},
		{"final, failed", func() views.GuestDoc {
			v := base()
			v.LastResult = &events.Result{ActionID: act.ID, Status: events.ResultFailed, UPID: upid,
				Error: "VM 101 qmp command failed", ErrorClass: "transient", Warnings: 2}
			v.LastResultSeq, v.Failures, v.LastError, v.LastErrorKind = 8, 1, "VM 101 qmp command failed", "transient"
			return views.GuestDoc{View: v, Status: planner.Status{Kind: planner.Error, Reason: "start failed (1 attempt)",
				RetryAt: t0.Add(time.Minute)}, UpdatedAt: t0.Add(3 * time.Second)}
		}, &views.ActionSummary{ID: act.ID, Op: events.OpStart, Reason: act.Reason, Result: events.ResultFailed, UPID: upid,
			Error: "VM 101 qmp command failed", Warnings: 2, At: act.Time},
			func(t *testing.T, s views.Summary) {
				if s.State != planner.Error || s.LastError != "VM 101 qmp command failed" || !s.RetryAt.Equal(t0.Add(time.Minute)) {
					t.Errorf("state %s last error %q retry at %s", s.State, s.LastError, s.RetryAt)
				}
			}},
		{"final, skipped with a reason", func() views.GuestDoc {
			v := base()
			v.LastResult = &events.Result{ActionID: act.ID, Status: events.ResultSkipped, Reason: "superseded by desired revision 9"}
			return views.GuestDoc{View: v, Status: planner.Status{Kind: planner.Pending}}
		}, &views.ActionSummary{ID: act.ID, Op: events.OpStart, Reason: act.Reason, Result: events.ResultSkipped,
			Error: "superseded by desired revision 9", At: act.Time}, nil},
		{"planned, no result yet", func() views.GuestDoc {
			v := base()
			v.InFlight = act
			return views.GuestDoc{View: v, Status: planner.Status{Kind: planner.Acting}}
		}, &views.ActionSummary{ID: act.ID, Op: events.OpStart, Reason: act.Reason, At: act.Time}, nil},
		{"no action ever", func() views.GuestDoc {
			v := base()
			v.LastAction, v.LastActionSeq = nil, 0
			return views.GuestDoc{View: v, Status: planner.Status{Kind: planner.Converged}}
		}, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := c.doc()
			s := views.Summarise(&d)
			if !reflect.DeepEqual(s.Last, c.want) {
				t.Fatalf("last action\n got %+v\nwant %+v", s.Last, c.want)
			}
			if s.VMID != 101 || s.Cluster != "pve" || s.State != d.Status.Kind || s.Reason != d.Status.Reason {
				t.Errorf("identity/status: %+v", s)
			}
			if s.Desired != desired || s.Revision != 5 || s.Publisher != "billing" || !s.DesiredAt.Equal(t0) || !s.UpdatedAt.Equal(d.UpdatedAt) {
				t.Errorf("desired part: %+v", s)
			}
			wantObs := &views.ObservedSummary{Exists: true, Node: "pve1", Kind: events.QEMU, Status: "stopped", Lock: "backup",
				Config: obs.Config, Pending: obs.Pending, ReadAt: t0}
			if !reflect.DeepEqual(s.Observed, wantObs) {
				t.Errorf("observed %+v, want %+v", s.Observed, wantObs)
			}
			if c.also != nil {
				c.also(t, s)
			}
			// The summary is what the API and `status -o json` print.
			b, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			for _, key := range []string{`"state":`, `"desired":`, `"observed":`, `"updated_at":`} {
				if !strings.Contains(string(b), key) {
					t.Errorf("summary JSON lacks %s: %s", key, b)
				}
			}
		})
	}
}

func TestSummariseUnobservedUnmanaged(t *testing.T) {
	d := views.GuestDoc{View: &projector.View{VMID: 300, Cluster: "pve"}, Status: planner.Status{Kind: planner.Unmanaged}}
	s := views.Summarise(&d)
	if s.Observed != nil || s.Desired != nil || s.Last != nil || s.State != planner.Unmanaged {
		t.Fatalf("summary %+v", s)
	}
	b, _ := json.Marshal(s)
	for _, key := range []string{`"observed"`, `"desired"`, `"last_action"`, `"retry_at"`} {
		if strings.Contains(string(b), key) {
			t.Errorf("empty %s printed: %s", key, b)
		}
	}
}

// awaits_approval carries the planner's typed status: "guard" for a held
// guest (also from a document written before the field existed),
// "destroy" for one behind the closed destroy gate, omitted otherwise.
func TestSummariseAwaitsApproval(t *testing.T) {
	v := &projector.View{VMID: 101, Cluster: "pve"}
	for _, tc := range []struct {
		status planner.Status
		want   string
	}{
		{planner.Status{Kind: planner.Held, Reason: "mass-change guard: …", Awaits: planner.AwaitsGuard}, `"awaits_approval":"guard"`},
		{planner.Status{Kind: planner.Held, Reason: "mass-change guard: …"}, `"awaits_approval":"guard"`},
		{planner.Status{Kind: planner.Blocked, Reason: "desired absent: the destroy gate is closed …", Awaits: planner.AwaitsDestroy}, `"awaits_approval":"destroy"`},
		{planner.Status{Kind: planner.Blocked, Reason: "desired absent, but guest 101 has Proxmox protection on …"}, ""},
		{planner.Status{Kind: planner.Converged}, ""},
	} {
		s := views.Summarise(&views.GuestDoc{View: v, Status: tc.status})
		b, _ := json.Marshal(s)
		if got := strings.Contains(string(b), `"awaits_approval"`); tc.want == "" && got || tc.want != "" && !strings.Contains(string(b), tc.want) {
			t.Errorf("%s: %s, want %q", tc.status.Kind, b, tc.want)
		}
	}
}
