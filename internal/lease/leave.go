package lease

import (
	"context"
	"sync"
	"time"
)

// deleteTimeout bounds each delete on the way out: a key the store does
// not delete in time expires after TTL anyway.
const deleteTimeout = 5 * time.Second

// leave releases every lease and the membership, after the partitions'
// work has drained (bounded by ReleaseTimeout).
func (m *Manager) leave() {
	ctx, cancel := m.withTimeout(context.Background(), m.cfg.ReleaseTimeout)
	defer cancel()
	// Renew while draining (below): a long drain must not let leases
	// expire under work still in flight.
	renew := m.clk.NewTicker(m.cfg.Renew)
	m.mu.Lock()
	held := make(map[int]*holding, len(m.held))
	for p, h := range m.held {
		held[p] = h
	}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for p, h := range held {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if h.releasing != nil {
				select {
				case <-h.releasing:
				case <-ctx.Done():
					return
				}
			} else {
				done := make(chan struct{})
				go func() { defer close(done); m.cfg.OnRelease(p) }()
				select {
				case <-done:
				case <-ctx.Done():
					return // the lease expires on its own
				}
			}
			m.mu.Lock()
			rev := h.rev
			m.mu.Unlock()
			dctx, dcancel := m.withTimeout(context.Background(), deleteTimeout)
			defer dcancel()
			_ = m.store.Delete(dctx, m.leaseKey(p), rev)
		}()
	}
	stop := make(chan struct{})
	go func() {
		defer renew.Stop()
		for {
			select {
			case <-stop:
				return
			case <-renew.C():
				for p, h := range held {
					m.mu.Lock()
					rev := h.rev
					m.mu.Unlock()
					rctx, rcancel := m.withTimeout(context.Background(), m.cfg.Renew)
					if nrev, err := m.store.Update(rctx, m.leaseKey(p), []byte(m.cfg.Member), rev); err == nil {
						m.mu.Lock()
						h.rev, h.renewedAt = nrev, m.clk.Now()
						m.mu.Unlock()
					}
					rcancel()
				}
			}
		}
	}()
	wg.Wait()
	close(stop)
	m.mu.Lock()
	clear(m.held)
	m.mu.Unlock()
	dctx, dcancel := m.withTimeout(context.Background(), deleteTimeout)
	defer dcancel()
	_ = m.store.Delete(dctx, m.memberKey(m.cfg.Member), 0)
	m.log.Info().Msg("left partition group")
}
