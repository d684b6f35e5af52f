package app

import (
	"context"
	"time"

	"github.com/converge-pve/converge/internal/audit"
)

// timeline is api.Server.Timeline: one guest's timeline as `converge
// history` reads it, a page of it newest first. Desired events are judged
// with this process's --trusted-keys and --require-signed (the settings
// its planner would use; `converge api` must share them with the
// planners, docs/signing.md), so that signed revisions show who signed.
//
// It reads the guest's whole timeline for every page, then cuts the page
// (audit.Page): acceptable for the histories guests have today (a few
// hundred events); a guest with a long journal would want a read from the
// newest backwards instead.
func (a *App) timeline(ctx context.Context, vmid int, before uint64, limit int) (any, uint64, error) {
	es, err := audit.Timeline(ctx, a.b.JS, a.cfg.Bus.Stream, a.cfg.Cluster, vmid, a.cfg.Bus.Partitions, time.Time{},
		a.cfg.Planner.Planner.Auth)
	if err != nil {
		return nil, 0, err
	}
	page, next := audit.Page(es, before, limit)
	return page, next, nil
}
