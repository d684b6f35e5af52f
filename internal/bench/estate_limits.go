package bench

import (
	"fmt"
	"math"

	"github.com/converge-pve/converge/internal/app"
	"github.com/converge-pve/converge/internal/pve"
)

// ConvergeLimits say which limits converge runs with in the Proxmox-shaped
// profiles. The zero value is converge's shipped defaults, read from
// app.DefaultConfig (planner.DefaultLimits, executor.DefaultConfig,
// observer.DefaultConfig) at run time, never copied here.
type ConvergeLimits struct {
	// LimitsOff lifts every per-node limit converge has: the node task
	// slots, the node rate and the calls in flight per node. The report
	// says limits "off".
	LimitsOff bool
	// NodeConcurrency, if > 0, overrides planner.Limits.NodeConcurrency
	// (even with LimitsOff).
	NodeConcurrency int
	// NodeRate, if > 0, overrides executor.Config.NodeRate;
	// NodeRateUnlimited lifts it (both even with LimitsOff).
	NodeRate          float64
	NodeRateUnlimited bool
}

// validate refuses overrides that make no sense; prefix names the
// options' type, e.g. "bench.ProxmoxOptions.".
func (l ConvergeLimits) validate(prefix string) error {
	switch {
	case l.NodeConcurrency < 0:
		return fmt.Errorf(prefix+"NodeConcurrency: must be >= 1 (0: converge's default), got %d", l.NodeConcurrency)
	case l.NodeRate < 0 || math.IsNaN(l.NodeRate) || math.IsInf(l.NodeRate, 1):
		return fmt.Errorf(prefix+"NodeRate: must be > 0 calls per second, or unlimited (0: converge's default), got %v", l.NodeRate)
	}
	return nil
}

// name is the report's limits field: "shipped" or "off".
func (l ConvergeLimits) name() string {
	if l.LimitsOff {
		return "off"
	}
	return "shipped"
}

// applied is what converge runs with, as the reports give it.
type applied struct {
	cfg             app.Config
	pve             pve.Config
	lifted          []string
	nodeConcurrency int     // -1: none
	nodeRate        float64 // -1: none
}

// convergeConfig is converge's configuration for a run, as `converge up`
// assembles it, with l applied.
func (l ConvergeLimits) convergeConfig() applied {
	a := applied{cfg: app.DefaultConfig(), pve: pve.DefaultConfig()}
	lim, ex := &a.cfg.Planner.Planner.Limits, &a.cfg.Executor
	if l.LimitsOff {
		lim.NodeConcurrencyUnlimited, ex.NodeRateUnlimited, a.pve.NodeCalls = true, true, 0
		a.lifted = []string{"planner.Limits.NodeConcurrency", "executor.Config.NodeRate", "pve.Config.NodeCalls"}
	}
	if l.NodeConcurrency > 0 {
		lim.NodeConcurrency, lim.NodeConcurrencyUnlimited = l.NodeConcurrency, false
	}
	switch {
	case l.NodeRateUnlimited:
		ex.NodeRateUnlimited = true
	case l.NodeRate > 0:
		ex.NodeRate, ex.NodeRateUnlimited = l.NodeRate, false
	}
	a.nodeConcurrency, a.nodeRate = lim.NodeConcurrency, ex.NodeRate
	if lim.NodeConcurrencyUnlimited {
		a.nodeConcurrency = -1
	}
	if ex.NodeRateUnlimited {
		a.nodeRate = -1
	}
	return a
}
