package app

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/converge-pve/converge/executor"
)

// metricsSource is what a Proxmox may offer the process's registry:
// *pve.Client counts and times its HTTP requests (package pve).
type metricsSource interface {
	Collectors() []prometheus.Collector
}

// registerShared registers on the process's registry the metrics that no
// single role owns: the Proxmox client's requests (shared by the observer
// and the executors) and the executors' metrics (one set however many
// executors the process runs). Each role registers its own (the observer,
// the planner, the control router); the Go and process collectors are
// registered at Start. It returns the executors' metrics, nil without
// executors.
func (a *App) registerShared() *executor.Metrics {
	if c, ok := a.cfg.Proxmox.(metricsSource); ok && (a.cfg.Roles.Observer || a.cfg.Roles.Executor) {
		a.reg.MustRegister(c.Collectors()...)
	}
	if !a.cfg.Roles.Executor {
		return nil
	}
	return executor.NewMetrics(a.reg)
}
