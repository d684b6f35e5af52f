package app_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/pvesim/pvesimtest"
	"github.com/converge-pve/converge/internal/views"
)

// settledAll is caughtUp for every guest: the planner has folded the
// journal up to where it ends now, and no guest has an action in flight
// or a next step.
func settledAll(t *testing.T, p *pipeline) []views.GuestDoc {
	t.Helper()
	ctx := pvesimtest.Context(t)
	info, err := p.a.Bus().Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var docs []views.GuestDoc
	var why string
	if !until(60*time.Second, func() bool {
		c, err := p.rd.ClusterDoc(ctx)
		if err != nil || c == nil || c.Seq < info.LastSeq {
			why = "the planner has not folded the journal"
			return false
		}
		if docs, err = p.rd.List(ctx); err != nil {
			why = err.Error()
			return false
		}
		for _, d := range docs {
			if d.View == nil || d.View.InFlight != nil || len(d.Next) > 0 {
				why = fmt.Sprintf("guest %v acts", d.View)
				return false
			}
		}
		return true
	}) {
		t.Fatalf("the estate did not settle: %s", why)
	}
	return docs
}

// lineDiff lists the lines of b that differ from a's.
func lineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for i := 0; i < max(len(al), len(bl)) && len(out) < 20; i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			out = append(out, fmt.Sprintf("%d: - %s\n%d: + %s", i+1, x, i+1, y))
		}
	}
	return strings.Join(out, "\n")
}
