package executor

import (
	"context"
	"sync"

	"golang.org/x/time/rate"

	"github.com/converge-pve/converge/internal/pve"
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
	burst := nodeBurst(r.perNode, n)
	r.mu.Lock()
	l := r.lim[node]
	if l == nil {
		l = rate.NewLimiter(share, burst)
		r.lim[node] = l
	} else if n != r.n {
		l.SetLimit(share)
		l.SetBurst(burst)
	}
	if n != r.n {
		for _, o := range r.lim {
			o.SetLimit(share)
			o.SetBurst(burst)
		}
		r.n = n
	}
	r.mu.Unlock()
	return l.Wait(ctx)
}

// nodeBurst is the calls an executor may make to a node at once within
// its share: up to the node's three pvedaemon workers, divided among the
// executors, and never more than a second's share. A burst of one spread
// the calls evenly but made every call that came within 1/rate of another
// wait, even far below the rate: at 6 writes a second against 10, about
// 90 ms each (the Proxmox profile's makespan 1.15 × the ideal; 1.06 with
// the burst).
func nodeBurst(perNode float64, executors int) int {
	return max(1, min(pve.DefaultNodeCalls/max(executors, 1), int(perNode/float64(max(executors, 1)))))
}
