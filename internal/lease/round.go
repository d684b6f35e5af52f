package lease

import (
	"context"
	"errors"
	"sort"
	"strings"
	"time"
)

// round is one membership, renewal, release and claim pass.
func (m *Manager) round(ctx context.Context) {
	if _, err := m.store.Put(ctx, m.memberKey(m.cfg.Member), []byte(m.clk.Now().UTC().Format(time.RFC3339Nano))); err != nil {
		if ctx.Err() == nil {
			m.log.Warn().Err(err).Msg("membership not renewed")
		}
	}
	members, err := m.liveMembers(ctx)
	if err != nil {
		if ctx.Err() == nil {
			m.log.Warn().Err(err).Msg("members unreadable; renewing only")
		}
		members = nil
	}
	m.mu.Lock()
	if members != nil {
		m.members = members
	}
	members = m.members
	m.mu.Unlock()

	now := m.clk.Now()
	assigned := Assign(m.cfg.Partitions, members)
	for p := 0; p < m.cfg.Partitions; p++ {
		if ctx.Err() != nil {
			return
		}
		preferred := assigned[p]
		m.mu.Lock()
		h := m.held[p]
		m.mu.Unlock()
		if h != nil {
			m.renewOrRelease(ctx, p, h, preferred, now)
			continue
		}
		m.maybeClaim(ctx, p, preferred, now)
	}
}

// liveMembers lists the members whose membership key has not expired,
// sorted; nil if there are none (not even this member, whose write
// failed): the round then goes on with the last list.
func (m *Manager) liveMembers(ctx context.Context) ([]string, error) {
	keys, err := m.store.Keys(ctx, m.cfg.Group+".m.*")
	if err != nil {
		return nil, err
	}
	prefix := m.cfg.Group + ".m."
	var ms []string
	for _, k := range keys {
		ms = append(ms, strings.TrimPrefix(k, prefix))
	}
	sort.Strings(ms)
	return ms, nil
}

func (m *Manager) renewOrRelease(ctx context.Context, p int, h *holding, preferred string, now time.Time) {
	if h.releasing != nil {
		select {
		case <-h.releasing:
			// Drained: hand the partition over.
			if err := m.store.Delete(ctx, m.leaseKey(p), h.rev); err != nil && ctx.Err() == nil {
				m.log.Warn().Err(err).Int("partition", p).Msg("lease not deleted; it expires instead")
			}
			m.mu.Lock()
			delete(m.held, p)
			m.mu.Unlock()
			m.log.Info().Int("partition", p).Str("to", preferred).Msg("partition handed over")
			return
		default:
		}
	}
	rev, err := m.store.Update(ctx, m.leaseKey(p), []byte(m.cfg.Member), h.rev)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		if refused(err) {
			m.lose(p, err)
			return
		}
		// Unreachable store: keep the lease until it is certainly gone.
		m.log.Warn().Err(err).Int("partition", p).Msg("lease not renewed")
		m.mu.Lock()
		stale := m.clk.Now().Sub(h.renewedAt) >= m.cfg.TTL-m.cfg.Renew
		m.mu.Unlock()
		if stale {
			m.lose(p, err)
		}
		return
	}
	m.mu.Lock()
	h.rev, h.renewedAt = rev, now
	m.mu.Unlock()
	if h.releasing == nil && preferred != "" && preferred != m.cfg.Member {
		m.log.Info().Int("partition", p).Str("to", preferred).Msg("releasing partition to its preferred member")
		done := make(chan struct{})
		m.mu.Lock()
		h.releasing = done
		m.mu.Unlock()
		go func() { defer close(done); m.cfg.OnRelease(p) }()
	}
}

func (m *Manager) lose(p int, err error) {
	m.log.Warn().Err(err).Int("partition", p).Msg("partition lease lost; stopping its work")
	m.mu.Lock()
	h := m.held[p]
	delete(m.held, p)
	m.mu.Unlock()
	if h != nil && h.releasing != nil {
		<-h.releasing
		return // OnRelease already stopped it
	}
	m.cfg.OnLost(p)
}

func (m *Manager) maybeClaim(ctx context.Context, p int, preferred string, now time.Time) {
	present, err := m.store.Get(ctx, m.leaseKey(p))
	switch {
	case err != nil:
		if ctx.Err() == nil {
			m.log.Warn().Err(err).Int("partition", p).Msg("lease unreadable")
		}
		return
	case present:
		m.mu.Lock()
		delete(m.freeSince, p)
		m.mu.Unlock()
		return // held by someone
	}
	m.mu.Lock()
	since, seen := m.freeSince[p]
	if !seen {
		since = now
		m.freeSince[p] = now
	}
	m.mu.Unlock()
	if preferred != m.cfg.Member && now.Sub(since) < m.cfg.TTL {
		return // its preferred member will claim it
	}
	rev, err := m.store.Create(ctx, m.leaseKey(p), []byte(m.cfg.Member))
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, ErrExists) {
			m.log.Warn().Err(err).Int("partition", p).Msg("lease not claimed")
		}
		return
	}
	m.mu.Lock()
	m.held[p] = &holding{rev: rev, renewedAt: now}
	delete(m.freeSince, p)
	m.mu.Unlock()
	m.log.Debug().Int("partition", p).Bool("preferred", preferred == m.cfg.Member).Msg("partition acquired")
	m.cfg.OnAcquire(p)
}
