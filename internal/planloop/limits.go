package planloop

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/planner"
)

// Ledger is the cluster's limits ledger: one value per limit key, written
// by compare-and-set (bus.LimitsStore; a lost race is journal.ErrStale). Every planner of the cluster asks
// it before publishing an action that a limit counts, so that two planners
// never both take the last room.
type Ledger interface {
	Load(ctx context.Context, key string) ([]byte, uint64, error)
	Store(ctx context.Context, key string, val []byte, rev uint64) error
}

// ledgerAttempts bounds compare-and-set retries on one key per batch: each
// failed attempt means another planner wrote it meanwhile.
const ledgerAttempts = 8

// ledgerParallel is how many node and storage keys one batch asks at once.
const ledgerParallel = 32

// admit asks the ledger for the claims of the actions handed out, one
// read and write per key for the whole batch (nodes first, the guard
// last), and returns the actions to publish. An action refused on one key
// has its grants on the keys before withdrawn, and is reported refused to
// the engine. Without a ledger every action goes.
func (l *Loop) admit(ctx context.Context, ps []planner.Publish) []planner.Publish {
	if l.cfg.Ledger == nil {
		return ps
	}
	var keys []string
	for _, p := range ps {
		for _, c := range p.Claims {
			if !slices.Contains(keys, c.Key) {
				keys = append(keys, c.Key)
			}
		}
	}
	if len(keys) == 0 {
		return ps
	}
	slices.SortStableFunc(keys, func(a, b string) int {
		return boolInt(planner.IsGuardKey(a)) - boolInt(planner.IsGuardKey(b))
	})
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	now := l.clk.Now()
	refused := map[string]planner.Claim{}
	granted := map[string][]string{} // action id → keys granted
	// The node and storage keys are independent of one another: they are
	// asked at once (an estate's batch names a hundred nodes, and one
	// read and write after another held the loop for a round trip each).
	// The guard's keys follow, for the actions every other key granted.
	first := 0
	for first < len(keys) && !planner.IsGuardKey(keys[first]) {
		first++
	}
	type answer struct {
		ok  map[string]bool
		err error
	}
	wants := func(key string) ([]planner.Publish, planner.Claim) {
		var want []planner.Publish
		var claim planner.Claim
		for _, p := range ps {
			if _, no := refused[p.Action.ID]; no {
				continue
			}
			for _, c := range p.Claims {
				if c.Key == key {
					want, claim = append(want, p), c
				}
			}
		}
		return want, claim
	}
	settle := func(key string, want []planner.Publish, claim planner.Claim, a answer) {
		if a.err != nil {
			l.log.Warn().Err(a.err).Str("key", key).Msg("limits ledger unavailable; actions wait")
		}
		for _, p := range want {
			if a.ok[p.Action.ID] {
				granted[p.Action.ID] = append(granted[p.Action.ID], key)
			} else {
				refused[p.Action.ID] = claim
			}
		}
	}
	answers := make([]answer, first)
	wantOf := make([][]planner.Publish, first)
	claimOf := make([]planner.Claim, first)
	sem := make(chan struct{}, ledgerParallel)
	var wg sync.WaitGroup
	for i, key := range keys[:first] {
		wantOf[i], claimOf[i] = wants(key)
		live := l.eng.LiveFunc(claimOf[i], now) // it reads the engine, which the loop leaves alone while it waits here
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			ok, err := l.grant(ctx, key, claimOf[i], wantOf[i], now, live)
			answers[i] = answer{ok, err}
		}()
	}
	wg.Wait()
	for i, key := range keys[:first] {
		settle(key, wantOf[i], claimOf[i], answers[i])
	}
	for _, key := range keys[first:] {
		want, claim := wants(key)
		ok, err := l.grant(ctx, key, claim, want, now, l.eng.LiveFunc(claim, now))
		settle(key, want, claim, answer{ok, err})
	}
	out := ps[:0:0]
	for _, p := range ps {
		c, no := refused[p.Action.ID]
		if !no {
			out = append(out, p)
			continue
		}
		for _, key := range granted[p.Action.ID] {
			if err := l.withdraw(ctx, key, p.Action.VMID, p.Action.ID); err != nil {
				l.log.Warn().Err(err).Str("key", key).Int("vmid", p.Action.VMID).Msg("limits ledger entry not withdrawn; it lapses when the action is not found")
			}
		}
		l.log.Info().Int("vmid", p.Action.VMID).Str("action", p.Action.ID).Str("limit", c.Key).Int("of", c.Limit).
			Msg("limit reached across the cluster's planners; the guest waits")
		limit := "node"
		if planner.IsGuardKey(c.Key) {
			limit = "guard"
		}
		l.metrics.refused.WithLabelValues(limit).Inc()
		l.eng.Refused(p.Action.VMID, p.Action.ID, c, now)
	}
	return out
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// grant decides the claims of want on key, retrying when another planner
// wrote the key meanwhile.
func (l *Loop) grant(ctx context.Context, key string, c planner.Claim, want []planner.Publish, now time.Time, live func(planner.Entry) bool) (map[string]bool, error) {
	for range ledgerAttempts {
		entries, rev, err := l.loadLedger(ctx, key)
		if err != nil {
			return nil, err
		}
		ok := map[string]bool{}
		dirty := false
		for _, p := range want {
			var changed, yes bool
			entries, changed, yes = planner.Grant(entries, c, planner.Entry{VMID: p.Action.VMID, ID: p.Action.ID, After: p.ExpectLastSeq, At: now}, live)
			ok[p.Action.ID], dirty = yes, dirty || changed
		}
		if !dirty {
			return ok, nil
		}
		err = l.storeLedger(ctx, key, entries, rev)
		if errors.Is(err, journal.ErrStale) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return ok, nil
	}
	return nil, fmt.Errorf("limits ledger %s: %d writes in a row lost to other planners", key, ledgerAttempts)
}

func (l *Loop) withdraw(ctx context.Context, key string, vmid int, id string) error {
	for range ledgerAttempts {
		entries, rev, err := l.loadLedger(ctx, key)
		if err != nil {
			return err
		}
		entries, changed := planner.Withdraw(entries, vmid, id)
		if !changed {
			return nil
		}
		if err = l.storeLedger(ctx, key, entries, rev); !errors.Is(err, journal.ErrStale) {
			return err
		}
	}
	return fmt.Errorf("limits ledger %s: contended", key)
}

func (l *Loop) loadLedger(ctx context.Context, key string) ([]planner.Entry, uint64, error) {
	val, rev, err := l.cfg.Ledger.Load(ctx, key)
	if err != nil || len(val) == 0 {
		return nil, rev, err
	}
	var entries []planner.Entry
	if err := json.Unmarshal(val, &entries); err != nil {
		// A value no planner wrote: start it again rather than block.
		l.log.Warn().Err(err).Str("key", key).Msg("limits ledger entry unreadable; replacing it")
		return nil, rev, nil
	}
	return entries, rev, nil
}

func (l *Loop) storeLedger(ctx context.Context, key string, entries []planner.Entry, rev uint64) error {
	val, err := json.Marshal(entries)
	if err != nil {
		return err
	}
	return l.cfg.Ledger.Store(ctx, key, val, rev)
}
