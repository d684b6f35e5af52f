package planner_test

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"rsc.io/script"
	"sigs.k8s.io/yaml"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/planfile"
	"github.com/converge-pve/converge/internal/scenario"
	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
)

// TestPlanFileScenarios shows that `converge plan -f FILE` predicts what
// the live planner does (testdata/planfile/*.txtar): each script builds an
// estate, plans a file from the documents the engine flushed (as the views
// hold them) with `planfile`, then publishes the same file to the engine
// with `desirefile`, which fails unless every guest's handed-out action
// matches the prediction (op, vmid and parameters: config keys and values,
// deletes, reverts, resize, migration target, pool, the op a hold holds),
// and every guest predicted to get no action gets none and is in the
// predicted state.
func TestPlanFileScenarios(t *testing.T) {
	scenario.Run(t, "testdata/planfile/*.txtar", func(t *testing.T) map[string]script.Cmd {
		h := newHarness(t)
		cmds := h.cmds()
		var predicted *planfile.Result
		cmds["planfile"] = fileCmd("plan FILE from the documents flushed (ticks once first), print the prediction", func(raw []byte) (string, error) {
			out, _ := h.tick(nil)
			r, err := h.planFile(raw)
			predicted = r
			if err != nil {
				return "", err
			}
			return out + describe(r), nil
		})
		cmds["desirefile"] = fileCmd("fold FILE's desired states in order; fail unless the actions match the last planfile's", func(raw []byte) (string, error) {
			if predicted == nil {
				return "", fmt.Errorf("desirefile before planfile")
			}
			return h.desireFile(raw, predicted)
		})
		cmds["step"] = scenario.Cmd("fail unless VMID's newest action is step N (0: the first) of the last planfile's plan", "VMID N", func(args []string) (string, error) {
			return h.stepMatches(predicted, args)
		})
		return cmds
	})
}

// stepMatches checks a later step of a prediction: once the script has
// fed the results of the steps before it, the planner's newest action for
// the guest is the predicted step N.
func (h *harness) stepMatches(want *planfile.Result, args []string) (string, error) {
	var vmid, n int
	if want == nil || len(args) != 2 {
		return "", fmt.Errorf("want VMID N after planfile")
	}
	if _, err := fmt.Sscan(args[0]+" "+args[1], &vmid, &n); err != nil {
		return "", err
	}
	var steps []planner.Step
	for _, g := range want.Guests {
		if g.VMID == vmid {
			steps = g.Steps
		}
	}
	if n >= len(steps) {
		return "", fmt.Errorf("%d: the plan has %d step(s)", vmid, len(steps))
	}
	var a *events.Action
	for i := len(h.outbox) - 1; i >= 0 && a == nil; i-- {
		if h.outbox[i].Action.VMID == vmid {
			a = &h.outbox[i].Action
		}
	}
	if p, ok := h.lastAction[vmid]; a == nil && ok {
		a = &p.Action
	}
	if a == nil {
		return "", fmt.Errorf("%d: no action handed out", vmid)
	}
	w := steps[n]
	wl := actionLine(w.Op, w.Holds, w.Set, w.Delete, w.Revert, w.Resize, w.Migrate, w.Pool, w.Snapshot)
	gl := actionLine(a.Op, a.Holds, a.Set, a.Delete, a.Revert, a.Resize, a.Migrate, a.Pool, a.Snapshot)
	if wl != gl {
		return "", fmt.Errorf("%d: step %d predicted %q, the planner handed out %q", vmid, n, wl, gl)
	}
	return fmt.Sprintf("step %d %d matches %s\n", vmid, n, gl), nil
}

// fileCmd is a command reading the file its one argument names.
func fileCmd(summary string, fn func(raw []byte) (string, error)) script.Cmd {
	return script.Command(script.CmdUsage{Summary: summary, Args: "FILE"}, func(s *script.State, a ...string) (script.WaitFunc, error) {
		if len(a) != 1 {
			return nil, script.ErrUsage
		}
		raw, err := os.ReadFile(s.Path(a[0]))
		if err != nil {
			return nil, err
		}
		out, err := fn(raw)
		if err != nil {
			return nil, err
		}
		return func(*script.State) (string, string, error) { return out, "", nil }, nil
	})
}

// keepDocs remembers a flush's documents, as the views bucket would.
func (h *harness) keepDocs(f *planner.Flush) {
	if f == nil {
		return
	}
	if h.docs == nil {
		h.docs = map[int]planner.Doc{}
	}
	for _, d := range f.Docs {
		h.docs[d.View.VMID] = d
	}
	h.flushed = f
}

func entries(raw []byte) ([]planfile.Entry, error) {
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, err
	}
	return planfile.Split(js)
}

func (h *harness) planFile(raw []byte) (*planfile.Result, error) {
	es, err := entries(raw)
	if err != nil {
		return nil, err
	}
	if h.flushed == nil {
		return nil, fmt.Errorf("no documents flushed yet")
	}
	pol, lim := h.cfg.Policy, h.cfg.Limits
	cd := &views.ClusterDoc{State: h.flushed.State, Seq: h.flushed.Seq, Planner: h.cfg.Name, Policy: &pol, Limits: &lim}
	docs := make([]views.GuestDoc, 0, len(h.docs))
	for _, id := range slices.Sorted(maps.Keys(h.docs)) {
		d := h.docs[id]
		docs = append(docs, views.GuestDoc{View: d.View, Status: d.Decision.Status, Next: d.Decision.Steps})
	}
	return planfile.Plan(planfile.Input{Cluster: "pve", Docs: docs, ClusterDoc: cd, Entries: es, Now: h.now})
}

// describe prints a prediction: a line per guest, its first action (or
// none) and what it waits for.
func describe(r *planfile.Result) string {
	var b strings.Builder
	for _, g := range r.Guests {
		fmt.Fprintf(&b, "predict %d %s %s", g.VMID, g.Desired, g.Status.Kind)
		if len(g.Steps) > 0 {
			fmt.Fprintf(&b, " %s", actionLine(g.Steps[0].Op, g.Steps[0].Holds, g.Steps[0].Set, g.Steps[0].Delete, g.Steps[0].Revert,
				g.Steps[0].Resize, g.Steps[0].Migrate, g.Steps[0].Pool, g.Steps[0].Snapshot))
		} else {
			b.WriteString(" none")
		}
		if g.Waits != "" {
			fmt.Fprintf(&b, " waits=%s", g.Waits)
		}
		if g.Restart {
			b.WriteString(" restart")
		}
		fmt.Fprintf(&b, ": %s\n", g.Status.Reason)
		for i, st := range g.Steps[min(1, len(g.Steps)):] {
			fmt.Fprintf(&b, "then %d %d %s\n", g.VMID, i+1, actionLine(st.Op, st.Holds, st.Set, st.Delete, st.Revert, st.Resize, st.Migrate, st.Pool, st.Snapshot))
		}
		for _, p := range g.Rejected {
			fmt.Fprintf(&b, "rejected %d %s: %s\n", g.VMID, p.Field, p.Message)
		}
	}
	fmt.Fprintf(&b, "predicted %d action(s), changes=%t\n", r.Actions, r.Changes)
	return b.String()
}

// actionLine is what the comparison compares: the op and its parameters.
func actionLine(op, holds events.Op, set map[string]string, del, rev []string, rs *events.ResizeOp, m *events.MigrateOp, p *events.PoolOp, sn *events.SnapshotOp) string {
	var b strings.Builder
	b.WriteString(string(op))
	if holds != "" {
		fmt.Fprintf(&b, " holds=%s", holds)
	}
	for _, k := range slices.Sorted(maps.Keys(set)) {
		fmt.Fprintf(&b, " %s=%s", k, set[k])
	}
	for _, k := range del {
		fmt.Fprintf(&b, " -%s", k)
	}
	for _, k := range rev {
		fmt.Fprintf(&b, " revert=%s", k)
	}
	if rs != nil {
		fmt.Fprintf(&b, " disk=%s size=%d", rs.Disk, rs.SizeGiB)
	}
	if m != nil {
		fmt.Fprintf(&b, " target=%s online=%t", m.Target, m.Online)
	}
	if p != nil {
		fmt.Fprintf(&b, " pool=%q->%q", p.From, p.To)
	}
	if sn != nil {
		fmt.Fprintf(&b, " before=%s", sn.Before)
	}
	return b.String()
}

// desireFile folds the file's entries as desire -f publishes them (a
// rejected one is not published) and compares what the engine hands out
// with the prediction, guest by guest.
func (h *harness) desireFile(raw []byte, want *planfile.Result) (string, error) {
	es, err := entries(raw)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	start := len(h.outbox)
	hdr := events.Header{}
	hdr.Set(events.HeaderPublisher, "test")
	for _, e := range es {
		if _, err := events.DecodeDesired(e.Body, e.VMID); err != nil {
			continue // desire -f publishes nothing of a file with one; plan says which
		}
		h.fold(events.KindDesired, e.VMID, hdr, e.Body)
		b.WriteString(h.ready())
	}
	got := map[int][]string{}
	for _, p := range h.outbox[start:] {
		a := p.Action
		got[a.VMID] = append(got[a.VMID], actionLine(a.Op, a.Holds, a.Set, a.Delete, a.Revert, a.Resize, a.Migrate, a.Pool, a.Snapshot))
	}
	var bad []string
	for _, g := range want.Guests {
		acts := got[g.VMID]
		delete(got, g.VMID)
		switch {
		case g.Desired == "rejected":
			if len(acts) > 0 {
				bad = append(bad, fmt.Sprintf("%d: predicted rejected, got %q", g.VMID, acts))
			}
			continue
		case len(g.Steps) > 0:
			w := g.Steps[0]
			line := actionLine(w.Op, w.Holds, w.Set, w.Delete, w.Revert, w.Resize, w.Migrate, w.Pool, w.Snapshot)
			if len(acts) != 1 || acts[0] != line {
				bad = append(bad, fmt.Sprintf("%d: predicted %q, got %q", g.VMID, line, acts))
				continue
			}
		case len(acts) > 0:
			bad = append(bad, fmt.Sprintf("%d: predicted no action (%s), got %q", g.VMID, g.Status.Kind, acts))
			continue
		}
		d, ok := h.e.Decision(g.VMID)
		if !ok || d.Status.Kind != g.Status.Kind || d.Status.Limit != g.Status.Limit {
			bad = append(bad, fmt.Sprintf("%d: predicted %s %q, planner %s %q", g.VMID, g.Status.Kind, g.Status.Limit, d.Status.Kind, d.Status.Limit))
			continue
		}
		if len(acts) == 0 {
			acts = []string{"none " + string(d.Status.Kind)}
		}
		fmt.Fprintf(&b, "match %d %s\n", g.VMID, acts[0])
	}
	for id, acts := range got {
		bad = append(bad, fmt.Sprintf("%d: not predicted, got %q", id, acts))
	}
	if len(bad) > 0 {
		return "", fmt.Errorf("plan -f and the planner differ:\n%s\n%s", strings.Join(bad, "\n"), b.String())
	}
	return b.String(), nil
}
