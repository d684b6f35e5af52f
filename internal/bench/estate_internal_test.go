package bench

import (
	"slices"
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/app"
)

// The per-node read rate is the most reads within any one second, not
// within the seconds of the clock.
func TestMaxInWindow(t *testing.T) {
	s := int64(time.Second)
	for _, c := range []struct {
		ts   []int64
		want int
	}{
		{nil, 0},
		{[]int64{5}, 1},
		// 0.6 s and 1.4 s straddle a clock second: one window holds both.
		{[]int64{6 * s / 10, 14 * s / 10}, 2},
		// Exactly 1 s apart: two windows.
		{[]int64{0, s}, 1},
		{[]int64{3 * s, 0, s / 2, s / 2, 2 * s}, 3},
	} {
		if got := maxInWindow(slices.Clone(c.ts), s); got != c.want {
			t.Errorf("%v: %d, want %d", c.ts, got, c.want)
		}
	}
}

// Shipped limits are converge's defaults as app.DefaultConfig has them;
// limits off lifts every per-node one; an override wins either way.
func TestConvergeLimits(t *testing.T) {
	def := app.DefaultConfig()
	a := ConvergeLimits{}.convergeConfig()
	if a.cfg.Planner.Planner.Limits != def.Planner.Planner.Limits || a.cfg.Executor.NodeRate != def.Executor.NodeRate ||
		a.cfg.Executor.NodeRateUnlimited != def.Executor.NodeRateUnlimited || len(a.lifted) != 0 {
		t.Fatalf("shipped: %+v, lifted %v", a.cfg.Planner.Planner.Limits, a.lifted)
	}
	if (a.nodeConcurrency < 0) != def.Planner.Planner.Limits.NodeConcurrencyUnlimited || (a.nodeRate < 0) != def.Executor.NodeRateUnlimited {
		t.Errorf("reported %d, %v", a.nodeConcurrency, a.nodeRate)
	}
	off := ConvergeLimits{LimitsOff: true}
	a = off.convergeConfig()
	if !a.cfg.Planner.Planner.Limits.NodeConcurrencyUnlimited || !a.cfg.Executor.NodeRateUnlimited || a.nodeConcurrency != -1 || a.nodeRate != -1 ||
		a.pve.NodeCalls != 0 || !slices.Contains(a.lifted, "planner.Limits.NodeConcurrency") || !slices.Contains(a.lifted, "pve.Config.NodeCalls") {
		t.Errorf("off: %v, %d, %v", a.lifted, a.nodeConcurrency, a.nodeRate)
	}
	if off.name() != "off" || (ConvergeLimits{}).name() != "shipped" {
		t.Error("names")
	}
	off.NodeConcurrency, off.NodeRate = 3, 7
	if a = off.convergeConfig(); a.nodeConcurrency != 3 || a.nodeRate != 7 {
		t.Errorf("overrides: %d, %v", a.nodeConcurrency, a.nodeRate)
	}
	if (ConvergeLimits{NodeConcurrency: -1}).validate("x.") == nil || (ConvergeLimits{NodeRate: -2}).validate("x.") == nil {
		t.Error("negative overrides accepted")
	}
}
