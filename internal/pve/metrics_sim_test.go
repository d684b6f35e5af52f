package pve_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/pvesim"
)

// Every request is counted at the transport, by method and outcome, and a
// caller that asked is told whether Proxmox answered.
func TestSimRequestMetrics(t *testing.T) {
	s := startSim(t, pvesim.Options{Nodes: 1, Guests: 2})
	c := newClient(t, s)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c.Collectors()...)

	var answered, unanswered atomic.Int32
	ctx := pve.WithAnswered(tctx(t), func(ok bool) {
		if ok {
			answered.Add(1)
		} else {
			unanswered.Add(1)
		}
	})
	if _, err := c.Inventory(ctx); err != nil {
		t.Fatal(err)
	}
	// A guest that does not exist: Proxmox answers, with an error.
	_, err := c.GuestConfig(ctx, pve.GuestRef{Kind: pve.KindQEMU, Node: "pve1", VMID: 999})
	wantClass(t, err, pve.ClassGone)
	s.SetUnreachable(time.Hour)
	_, err = c.Inventory(ctx)
	wantClass(t, err, pve.ClassTransient)
	s.SetUnreachable(0)

	total := func(method, class string) float64 {
		return counter(t, reg, "converge_pve_requests_total", map[string]string{"method": method, "class": class})
	}
	if n := total("GET", "ok"); n != 1 {
		t.Errorf("GET ok: %v, want 1", n)
	}
	if n := total("GET", "gone"); n != 1 {
		t.Errorf("GET gone: %v, want 1", n)
	}
	if n := total("GET", "transient"); n < 1 {
		t.Errorf("GET transient: %v, want at least 1", n)
	}
	if n, err := testutil.GatherAndCount(reg, "converge_pve_request_duration_seconds"); err != nil || n != 1 {
		t.Errorf("duration series: %d (%v), want 1 (GET)", n, err)
	}
	if answered.Load() != 2 || unanswered.Load() < 1 {
		t.Errorf("answered %d, unanswered %d; want 2 and at least 1", answered.Load(), unanswered.Load())
	}
}

// counter is the value of the counter series name with exactly labels
// among what reg gathers, 0 if there is none.
func counter(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue next
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
