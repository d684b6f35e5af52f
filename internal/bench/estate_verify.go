package bench

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/converge-pve/converge/internal/pve"
)

// readCounter is converge's Proxmox client with its config reads counted:
// every GuestConfig (the observer's verification and change reads, the
// executor's read-backs) is one GET …/pending, the guest's config and
// pending values together (pve.Client.GuestConfig; a second GET …/config
// only for a Proxmox without digests, which the simulator is not). It
// counts on converge's side, in the bench's process, so the simulator
// needs no read log and its own process no counter: a mutex and an append
// per read while armed, an atomic load otherwise.
type readCounter struct {
	*pve.Client
	armed atomic.Bool
	mu    sync.Mutex
	// at holds each node's read times (unix ns, when sent) while armed;
	// first each guest's first successful read's answer time.
	at    map[string][]int64
	first map[int]int64
	// tasks times the starts in the change (EstateWaves).
	tasks *taskTimes
}

func newReadCounter(c *pve.Client, power time.Duration) *readCounter {
	return &readCounter{Client: c, at: map[string][]int64{}, first: map[int]int64{}, tasks: newTaskTimes(power)}
}

// arm starts counting; reads before are not counted.
func (c *readCounter) arm() { c.armed.Store(true) }

// GuestConfig is pve.Client.GuestConfig, counted.
func (c *readCounter) GuestConfig(ctx context.Context, ref pve.GuestRef) (*pve.GuestConfig, error) {
	if !c.armed.Load() {
		return c.Client.GuestConfig(ctx, ref)
	}
	sent := time.Now().UnixNano()
	g, err := c.Client.GuestConfig(ctx, ref)
	c.mu.Lock()
	c.at[ref.Node] = append(c.at[ref.Node], sent)
	if _, ok := c.first[ref.VMID]; !ok && err == nil {
		c.first[ref.VMID] = time.Now().UnixNano()
	}
	c.mu.Unlock()
	return g, err
}

// verified is how many guests among 100..100+guests-1 have been read
// since arm, and when the last of them was (unix ns; 0 for none).
func (c *readCounter) verified(guests int) (n int, last int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for vmid, at := range c.first {
		if vmid >= 100 && vmid < 100+guests {
			n++
			last = max(last, at)
		}
	}
	return n, last
}

// reads is how many reads were sent in [from, to] (unix ns), and the most
// any node was sent within one second (any window [t, t+1s)).
func (c *readCounter) reads(from, to int64) (total, maxPerNodeS int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ts := range c.at {
		in := make([]int64, 0, len(ts))
		for _, t := range ts {
			if t >= from && t <= to {
				in = append(in, t)
			}
		}
		total += len(in)
		maxPerNodeS = max(maxPerNodeS, maxInWindow(in, int64(time.Second)))
	}
	return total, maxPerNodeS
}

// maxInWindow is the most of the times ts that fall within one window
// [t, t+w) for any t.
func maxInWindow(ts []int64, w int64) int {
	slices.Sort(ts)
	most, lo := 0, 0
	for hi, t := range ts {
		for t-ts[lo] >= w {
			lo++
		}
		most = max(most, hi-lo+1)
	}
	return most
}
