package executor

import (
	"context"
	"sync"

	"golang.org/x/time/rate"
)

// nodeRates paces this executor's mutating Proxmox calls per node. The
// cluster's budget (Config.NodeRate calls per second per node) is shared
// by the executor group's live members: each takes its share, so the
// node sees at most NodeRate whatever the number of executors.
type nodeRates struct {
	perNode float64
	members func() int // live executors in the group (≥ 1)

	mu  sync.Mutex
	lim map[string]*rate.Limiter
	n   int // members the limiters were last sized for
}

func newNodeRates(perNode float64, members func() int) *nodeRates {
	return &nodeRates{perNode: perNode, members: members, lim: map[string]*rate.Limiter{}}
}

// wait blocks until a call to node is within this executor's share.
func (r *nodeRates) wait(ctx context.Context, node string) error {
	if r == nil || r.perNode <= 0 {
		return nil
	}
	n := max(r.members(), 1)
	share := rate.Limit(r.perNode / float64(n))
	r.mu.Lock()
	l := r.lim[node]
	if l == nil {
		// A burst of one: calls are spread evenly, never bunched.
		l = rate.NewLimiter(share, 1)
		r.lim[node] = l
	} else if n != r.n {
		l.SetLimit(share)
	}
	if n != r.n {
		for _, o := range r.lim {
			o.SetLimit(share)
		}
		r.n = n
	}
	r.mu.Unlock()
	return l.Wait(ctx)
}
