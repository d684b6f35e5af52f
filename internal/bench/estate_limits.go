package bench

import (
	"fmt"
	"math"
	"reflect"
	"strings"

	"github.com/converge-pve/converge/internal/app"
	"github.com/converge-pve/converge/internal/pve"
)

// ConvergeLimits say which limits converge runs with in the Proxmox-shaped
// profiles. The zero value is converge's shipped defaults, read from
// app.DefaultConfig (planner.DefaultLimits, executor.DefaultConfig,
// observer.DefaultConfig) at run time, never copied here.
type ConvergeLimits struct {
	// LimitsOff lifts every per-node limit converge has: each bool field named
	// Node…Unlimited in planner.Limits, executor.Config and pve.Config is
	// set (the node concurrency, the node rate, and a per-node call limit
	// however it comes to be named). The report says limits "off".
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
		a.lifted = append(a.lifted, liftNode("planner.Limits", reflect.ValueOf(lim).Elem())...)
		a.lifted = append(a.lifted, liftNode("executor.Config", reflect.ValueOf(ex).Elem())...)
		a.lifted = append(a.lifted, liftNode("pve.Config", reflect.ValueOf(&a.pve).Elem())...)
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

// liftNode sets every bool field of the struct v named Node…Unlimited and
// returns their names (type.Field). By name, so that a per-node limit
// added to converge is lifted too without this file knowing it.
func liftNode(typ string, v reflect.Value) []string {
	var names []string
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Type.Kind() == reflect.Bool && f.IsExported() && strings.HasPrefix(f.Name, "Node") && strings.HasSuffix(f.Name, "Unlimited") {
			v.Field(i).SetBool(true)
			names = append(names, typ+"."+f.Name)
		}
	}
	return names
}
