package planner

import (
	"testing"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/projector"
)

// A guest that waits for `converge approve` says which approval, typed:
// the guard's hold, or the destroy gate; nothing else does, a protected
// guest (no approval lifts it) and a paused one (resume first) included.
func TestPlanAwaitsApproval(t *testing.T) {
	owned := events.GuestConfig{Tags: []string{events.OwnerTag}}
	o := func(cfg events.GuestConfig, protected bool) *events.Observed {
		return &events.Observed{VMID: 101, Exists: true, Kind: events.QEMU, Status: "running", Node: "pve1", ReadAt: t0,
			Config: cfg, Protected: protected}
	}
	absent := &events.Desired{VMID: 101, Absent: true}
	stopped := &events.Desired{VMID: 101, Power: ptr(events.PowerStopped)}
	held := func() *projector.View {
		v := viewOf(stopped, o(owned, false))
		v.Held = &projector.Hold{Seq: 3, DesiredSeq: 1, Op: events.OpShutdown, Reason: "mass-change guard: …", At: t0}
		return v
	}
	for _, tc := range []struct {
		name  string
		v     *projector.View
		pol   func(*Policy)
		c     projector.ClusterState
		state StatusKind
		want  Approval
	}{
		{"destroy gate closed", viewOf(absent, o(owned, false)), nil, fresh(), Blocked, AwaitsDestroy},
		{"not created by converge", viewOf(absent, o(events.GuestConfig{}, false)), func(p *Policy) { p.AllowDestroy = true }, fresh(), Blocked, AwaitsDestroy},
		{"protected: no approval lifts it", viewOf(absent, o(owned, true)), nil, fresh(), Blocked, ""},
		{"destroy gate open", viewOf(absent, o(owned, false)), func(p *Policy) { p.AllowDestroy = true }, fresh(), Pending, ""},
		{"observer silent", viewOf(stopped, o(owned, false)), nil, projector.ClusterState{}, Blocked, ""},
		{"held by the guard", held(), nil, fresh(), Held, AwaitsGuard},
		{"held and paused", held(), nil, func() projector.ClusterState {
			c := fresh()
			c.PausedAll = &projector.Mark{Seq: 4, By: "ops", At: t0}
			return c
		}(), Paused, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := policy()
			if tc.pol != nil {
				tc.pol(&p)
			}
			d := Plan(tc.v, tc.c, p, t0)
			if d.Status.Kind != tc.state || d.Status.Awaits != tc.want {
				t.Fatalf("got %s awaits %q (%s), want %s awaits %q", d.Status.Kind, d.Status.Awaits, d.Status.Reason, tc.state, tc.want)
			}
		})
	}
}
