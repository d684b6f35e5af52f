package executor

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/pve"
)

// cloneSource is the template an OpClone action clones.
func cloneSource(a events.Action) pve.GuestRef {
	return pve.GuestRef{Kind: pve.Kind(a.Kind), Node: a.Clone.FromNode, VMID: a.Clone.From}
}

// cloneCheck runs before a clone is issued, on every delivery: a clone is
// issued only onto a vmid that is free, never twice. The guest may already
// exist: made by this action (a predecessor died before journalling the
// task, or after the task but before the result: its description names
// the action), or by someone else (refused, untouched). When it does not
// exist, a redelivery looks for a clone task of this action first.
func (j *job) cloneCheck(ctx context.Context) (outcome, bool) {
	a := j.a
	cfg, err := j.findTarget(ctx)
	switch {
	case ctx.Err() != nil:
		return abandon, true
	case err != nil:
		return outcome{result: j.failed(err, pve.Classify(err))}, true
	case cfg != nil && (cfg.Lock == "clone" || cfg.Lock == "create"):
		// Being made. Proxmox writes a clone's config (our description)
		// only once its first disk is copied ("# qmclone temporary file"
		// until then): the task says whose clone it is.
		if t, found := j.findClone(ctx); found {
			j.log.Info().Str("upid", t.UPID).Msg("adopting the clone this action started")
			return j.started(ctx, t), true
		}
		if ctx.Err() != nil {
			return abandon, true
		}
		// Not this action's task (or not found): never cloned over, never
		// called failed while it may still be running; the plan after it
		// is done sees who made it.
		return j.finish(ctx, j.locked(fmt.Sprintf("guest %d is being created (lock %s) by a clone this action cannot find as its own", a.VMID, cfg.Lock))), true
	case cfg != nil && !madeBy(cfg, a):
		r := j.failed(fmt.Errorf("vmid %d exists and was not created by converge (found before cloning): it is left untouched", a.VMID), pve.ClassTerminal)
		return outcome{result: r}, true
	case cfg != nil:
		j.ref.Node = cfg.Ref.Node
		r := j.result(events.ResultSucceeded)
		r.Reason, r.ErrorClass = "clone already done: the guest exists, made by this action", events.ClassAlreadyDone
		return j.finish(ctx, r), true
	case j.delivered > 1:
		// Issued by a predecessor whose guest is not there yet (or whose
		// clone failed): adopt its task rather than clone again.
		if t, found := j.findClone(ctx); found {
			j.log.Info().Str("upid", t.UPID).Msg("adopting a clone issued but not journalled by a previous attempt")
			return j.started(ctx, t), true
		}
		if ctx.Err() != nil {
			return abandon, true
		}
	}
	return abandon, false
}

// findTarget reads the clone's target guest where it can be: on the
// target node, or, while a clone onto another node runs, on the source's.
// nil when it exists on neither.
func (j *job) findTarget(ctx context.Context) (*pve.GuestConfig, error) {
	nodes := []string{j.a.Node}
	if src := j.a.Clone.FromNode; src != j.a.Node {
		nodes = append(nodes, src)
	}
	for _, n := range nodes {
		cfg, err := j.e.px.GuestConfig(ctx, pve.GuestRef{Kind: j.ref.Kind, Node: n, VMID: j.a.VMID})
		switch {
		case err == nil:
			return cfg, nil
		case pve.Classify(err) != pve.ClassGone:
			return nil, err
		}
	}
	return nil, nil
}

// madeBy reports whether a guest is this action's clone (or any guest
// converge created: the owner tag).
func madeBy(cfg *pve.GuestConfig, a events.Action) bool {
	if strings.Contains(cfg.Description, "(action "+a.ID+")") {
		return true
	}
	for _, t := range cfg.Tags {
		if strings.EqualFold(t, events.OwnerTag) {
			return true
		}
	}
	return false
}

// findClone looks for this action's clone task, when the Proxmox can.
func (j *job) findClone(ctx context.Context) (pve.TaskRef, bool) {
	f, ok := j.e.px.(CloneFinder)
	if !ok || j.a.Time.IsZero() {
		return pve.TaskRef{}, false
	}
	t, found, err := f.FindClone(ctx, cloneSource(j.a), j.a.VMID, j.a.Time.Truncate(time.Second))
	if err != nil {
		j.log.Warn().Err(err).Msg("clone task lookup failed")
		return pve.TaskRef{}, false
	}
	return t, found
}

// destroyCheck runs before a guest is destroyed: never a protected guest
// (Proxmox would refuse too), never a running or locked one.
func (j *job) destroyCheck(ctx context.Context) (outcome, bool) {
	cfg, err := j.e.px.GuestConfig(ctx, j.ref)
	switch {
	case ctx.Err() != nil:
		return abandon, true
	case err != nil && pve.Classify(err) == pve.ClassGone:
		r := j.result(events.ResultSucceeded)
		r.Reason, r.ErrorClass = "already gone", events.ClassAlreadyDone
		return j.finish(ctx, r), true
	case err != nil:
		return outcome{result: j.failed(err, pve.Classify(err))}, true
	case cfg.Protected:
		r := j.failed(fmt.Errorf("guest %d has Proxmox protection on: not destroyed", j.a.VMID), pve.ClassTerminal)
		return j.finish(ctx, r), true
	case cfg.Lock != "":
		return j.finish(ctx, j.locked(fmt.Sprintf("guest is locked (%s)", cfg.Lock))), true
	}
	st, err := j.e.px.GuestStatus(ctx, j.ref)
	switch {
	case ctx.Err() != nil:
		return abandon, true
	case err != nil:
		return outcome{result: j.failed(err, pve.Classify(err))}, true
	case st.Status != "stopped":
		r := j.failed(fmt.Errorf("guest %d is %s: it is shut down before it is destroyed", j.a.VMID, st.Status), pve.ClassTransient)
		return j.finish(ctx, r), true
	}
	return abandon, false
}
