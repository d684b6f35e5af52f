package pve

import (
	"context"
	"strings"
	"sync"
)

// DefaultNodeCalls is Config.NodeCalls' default: a Proxmox node serves
// API calls with 3 pvedaemon workers (writes and task starts) and 3
// pveproxy workers (reads) by default (pve-manager PVE/Service/pvedaemon.pm
// and pveproxy.pm, max_workers), and has no request rate limiter: a call
// beyond the free workers waits in the node's listen queue. More than 3 of
// one client's calls in flight to a node therefore only lengthen that
// queue, for the client and for everyone else using the node.
const DefaultNodeCalls = 3

// nodeSlots bounds a client's requests in flight per node: a request
// under /nodes/{node}/ takes one of that node's slots, any other (the
// cluster-wide paths the entry node serves) one of the entry node's.
type nodeSlots struct {
	n  int
	mu sync.Mutex
	by map[string]chan struct{}
}

func newNodeSlots(n int) *nodeSlots {
	if n <= 0 {
		return nil
	}
	return &nodeSlots{n: n, by: map[string]chan struct{}{}}
}

// acquire waits for a slot of the node path names, or for ctx; release
// gives it back.
func (s *nodeSlots) acquire(ctx context.Context, path string) (release func(), err error) {
	if s == nil {
		return func() {}, nil
	}
	node := nodeOfPath(path)
	s.mu.Lock()
	c := s.by[node]
	if c == nil {
		c = make(chan struct{}, s.n)
		s.by[node] = c
	}
	s.mu.Unlock()
	select {
	case c <- struct{}{}:
		return func() { <-c }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// nodeOfPath is the node a request path addresses (…/nodes/{node}/…), or
// "" for the cluster-wide paths.
func nodeOfPath(path string) string {
	const seg = "/nodes/"
	i := strings.Index(path, seg)
	if i < 0 {
		return ""
	}
	rest := path[i+len(seg):]
	if j := strings.IndexByte(rest, '/'); j >= 0 {
		rest = rest[:j]
	}
	return rest
}
