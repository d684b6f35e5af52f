package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// Bucket is the key-value bucket holding every group's leases.
const Bucket = "converge_leases"

// validToken is what a group or member may be: one KV key token.
var validToken = regexp.MustCompile(`^[-_=a-zA-Z0-9]+$`)

// Config configures a [Manager].
type Config struct {
	// Group names the set of instances sharing partitions, e.g.
	// "executor-pve". Letters, digits, '-' and '_' only.
	Group string
	// Member is this instance's id, unique among the group's live members.
	Member string
	// Partitions is how many partitions there are (0..Partitions-1).
	Partitions int
	// TTL is how long a lease or a membership outlives its last renewal
	// (default 5s). It is the bucket's MaxAge: the first manager to create
	// the bucket sets it for all.
	TTL time.Duration
	// Renew is the time between rounds (default TTL/5).
	Renew time.Duration
	// Replicas of the bucket when it is created (default 1).
	Replicas int
	// ReleaseTimeout bounds how long Run waits for OnRelease of every held
	// partition when its context ends (default 60s).
	ReleaseTimeout time.Duration
	// OnAcquire is called when a lease is won: start the partition's work.
	OnAcquire func(p int)
	// OnRelease is called when a lease is given up voluntarily (a member
	// preferred for it joined, or shutdown): stop taking work and finish
	// what is in flight, then return; the lease is deleted afterwards.
	OnRelease func(p int)
	// OnLost is called when a lease could not be renewed: stop the
	// partition's work at once; another member may already own it.
	OnLost func(p int)
	// Logger receives structured logs.
	Logger zerolog.Logger
}

func (c Config) withDefaults() (Config, error) {
	if !validToken.MatchString(c.Group) {
		return c, fmt.Errorf("lease: Config.Group %q must be letters, digits, '-', '_' or '='", c.Group)
	}
	if !validToken.MatchString(c.Member) {
		return c, fmt.Errorf("lease: Config.Member %q must be letters, digits, '-', '_' or '=' (see MemberID)", c.Member)
	}
	if c.Partitions < 1 {
		return c, fmt.Errorf("lease: Config.Partitions must be >= 1, got %d", c.Partitions)
	}
	if c.TTL == 0 {
		c.TTL = 5 * time.Second
	}
	if c.TTL < 100*time.Millisecond {
		return c, fmt.Errorf("lease: Config.TTL must be at least 100ms, got %s", c.TTL)
	}
	if c.Renew <= 0 {
		c.Renew = c.TTL / 5
	}
	if c.Renew >= c.TTL/2 {
		return c, fmt.Errorf("lease: Config.Renew (%s) must be below TTL/2 (%s)", c.Renew, c.TTL/2)
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.ReleaseTimeout == 0 {
		c.ReleaseTimeout = 60 * time.Second
	}
	for _, f := range []*func(int){&c.OnAcquire, &c.OnRelease, &c.OnLost} {
		if *f == nil {
			*f = func(int) {}
		}
	}
	return c, nil
}

// Manager holds and balances one member's leases. See the package
// documentation.
type Manager struct {
	cfg Config
	js  jetstream.JetStream
	kv  jetstream.KeyValue
	log zerolog.Logger

	mu   sync.Mutex
	held map[int]*holding
	// freeSince is when each partition was first seen free by this member.
	freeSince map[int]time.Time
	members   []string
}

type holding struct {
	rev       uint64
	renewedAt time.Time
	releasing chan struct{} // closed when OnRelease returned; nil if not releasing
}

// New checks cfg. Run does the work.
func New(cfg Config, js jetstream.JetStream) (*Manager, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if js == nil {
		return nil, errors.New("lease: New needs a JetStream context")
	}
	return &Manager{cfg: cfg, js: js, log: cfg.Logger.With().Str("group", cfg.Group).Str("member", cfg.Member).Logger(),
		held: map[int]*holding{}, freeSince: map[int]time.Time{}}, nil
}

// Open creates the lease bucket, or opens it if it exists.
func Open(ctx context.Context, js jetstream.JetStream, ttl time.Duration, replicas int) (jetstream.KeyValue, error) {
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: Bucket, Description: "converge partition leases",
		History: 1, TTL: ttl, Replicas: max(replicas, 1), Storage: jetstream.FileStorage})
	if errors.Is(err, jetstream.ErrBucketExists) {
		kv, err = js.KeyValue(ctx, Bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("lease: bucket %s: %w", Bucket, err)
	}
	return kv, nil
}

// Held reports whether this member holds p's lease and renewed it recently
// enough that no other member can have claimed it since.
func (m *Manager) Held(p int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.held[p]
	return h != nil && time.Since(h.renewedAt) < m.cfg.TTL-m.cfg.Renew
}

// Owned returns the partitions this member holds, in order.
func (m *Manager) Owned() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	ps := make([]int, 0, len(m.held))
	for p := range m.held {
		ps = append(ps, p)
	}
	sort.Ints(ps)
	return ps
}

// Members returns the live members seen in the last round.
func (m *Manager) Members() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.members...)
}

func (m *Manager) memberKey(id string) string { return m.cfg.Group + ".m." + id }
func (m *Manager) leaseKey(p int) string      { return m.cfg.Group + ".p." + strconv.Itoa(p) }

// Run takes part in the group until ctx ends, then releases everything.
func (m *Manager) Run(ctx context.Context) error {
	// The bucket may be unreachable for a while (a NATS cluster electing
	// leaders after a crash): wait for it rather than give up the role.
	delay := 250 * time.Millisecond
	for {
		kv, err := Open(ctx, m.js, m.cfg.TTL, m.cfg.Replicas)
		if err == nil {
			m.kv = kv
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		m.log.Warn().Err(err).Dur("retry_in", delay).Msg("lease bucket unavailable; retrying")
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Second)
	}
	kv := m.kv
	if st, err := kv.Status(ctx); err == nil && st.TTL() != m.cfg.TTL {
		m.log.Warn().Dur("bucket_ttl", st.TTL()).Dur("ttl", m.cfg.TTL).Msg("lease bucket has another TTL; it applies")
		if st.TTL() > 0 {
			m.cfg.TTL = st.TTL()
			if m.cfg.Renew >= m.cfg.TTL/2 {
				m.cfg.Renew = m.cfg.TTL / 5
			}
		}
	}
	m.log.Info().Int("partitions", m.cfg.Partitions).Dur("ttl", m.cfg.TTL).Msg("joining partition group")
	t := time.NewTicker(m.cfg.Renew)
	defer t.Stop()
	for {
		m.round(ctx)
		select {
		case <-ctx.Done():
			m.leave()
			return nil
		case <-t.C:
		}
	}
}

// round is one membership, renewal, release and claim pass.
func (m *Manager) round(ctx context.Context) {
	if _, err := m.kv.PutString(ctx, m.memberKey(m.cfg.Member), time.Now().UTC().Format(time.RFC3339Nano)); err != nil {
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

	now := time.Now()
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

func (m *Manager) renewOrRelease(ctx context.Context, p int, h *holding, preferred string, now time.Time) {
	if h.releasing != nil {
		select {
		case <-h.releasing:
			// Drained: hand the partition over.
			if err := m.kv.Delete(ctx, m.leaseKey(p), jetstream.LastRevision(h.rev)); err != nil && ctx.Err() == nil {
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
	rev, err := m.kv.Update(ctx, m.leaseKey(p), []byte(m.cfg.Member), h.rev)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) || errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyExists) {
			m.lose(p, err)
			return
		}
		// Unreachable bus: keep the lease until it is certainly gone.
		m.log.Warn().Err(err).Int("partition", p).Msg("lease not renewed")
		m.mu.Lock()
		stale := time.Since(h.renewedAt) >= m.cfg.TTL-m.cfg.Renew
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
	e, err := m.kv.Get(ctx, m.leaseKey(p))
	switch {
	case err == nil && e.Operation() == jetstream.KeyValuePut:
		m.mu.Lock()
		delete(m.freeSince, p)
		m.mu.Unlock()
		return // held by someone
	case err != nil && !errors.Is(err, jetstream.ErrKeyNotFound):
		if ctx.Err() == nil {
			m.log.Warn().Err(err).Int("partition", p).Msg("lease unreadable")
		}
		return
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
	rev, err := m.kv.Create(ctx, m.leaseKey(p), []byte(m.cfg.Member))
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, jetstream.ErrKeyExists) {
			m.log.Warn().Err(err).Int("partition", p).Msg("lease not claimed")
		}
		return
	}
	m.mu.Lock()
	m.held[p] = &holding{rev: rev, renewedAt: now}
	delete(m.freeSince, p)
	m.mu.Unlock()
	m.log.Info().Int("partition", p).Bool("preferred", preferred == m.cfg.Member).Msg("partition acquired")
	m.cfg.OnAcquire(p)
}

// leave releases every lease and the membership, after the partitions'
// work has drained (bounded by ReleaseTimeout).
func (m *Manager) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.ReleaseTimeout)
	defer cancel()
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
			dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer dcancel()
			_ = m.kv.Delete(dctx, m.leaseKey(p), jetstream.LastRevision(rev))
		}()
	}
	// Renew while draining: a long drain must not let leases expire under
	// work still in flight.
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(m.cfg.Renew)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				for p, h := range held {
					m.mu.Lock()
					rev := h.rev
					m.mu.Unlock()
					rctx, rcancel := context.WithTimeout(context.Background(), m.cfg.Renew)
					if nrev, err := m.kv.Update(rctx, m.leaseKey(p), []byte(m.cfg.Member), rev); err == nil {
						m.mu.Lock()
						h.rev, h.renewedAt = nrev, time.Now()
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
	dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer dcancel()
	_ = m.kv.Delete(dctx, m.memberKey(m.cfg.Member))
	m.log.Info().Msg("left partition group")
}

func (m *Manager) liveMembers(ctx context.Context) ([]string, error) {
	lister, err := m.kv.ListKeysFiltered(ctx, m.cfg.Group+".m.*")
	if err != nil {
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return []string{m.cfg.Member}, nil
		}
		return nil, err
	}
	defer func() { _ = lister.Stop() }()
	prefix := m.cfg.Group + ".m."
	var ms []string
	for k := range lister.Keys() {
		ms = append(ms, strings.TrimPrefix(k, prefix))
	}
	sort.Strings(ms)
	return ms, nil
}

// Assign returns each partition's preferred member: rendezvous hashing of
// (member, partition), bounded so that every member prefers
// floor(partitions/members) or one more. Every member computes the same assignment from
// the same member list; it is balanced, and a join or a leave moves few
// partitions. Empty strings when there are no members.
func Assign(partitions int, members []string) []string {
	out := make([]string, partitions)
	if len(members) == 0 {
		return out
	}
	ms := append([]string(nil), members...)
	sort.Strings(ms)
	// floor each, and rem members one more: exactly balanced.
	floor, rem := partitions/len(ms), partitions%len(ms)
	load := make(map[string]int, len(ms))
	type cand struct {
		id    string
		score uint64
	}
	cs := make([]cand, len(ms))
	for p := range partitions {
		for i, id := range ms {
			cs[i] = cand{id, score(id, p)}
		}
		sort.Slice(cs, func(a, b int) bool {
			if cs[a].score != cs[b].score {
				return cs[a].score > cs[b].score
			}
			return cs[a].id < cs[b].id
		})
		for _, c := range cs {
			l := load[c.id]
			if l < floor || (l == floor && rem > 0) {
				if l == floor {
					rem--
				}
				out[p] = c.id
				load[c.id]++
				break
			}
		}
	}
	return out
}

func score(id string, p int) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	_, _ = h.Write([]byte{'/'})
	_, _ = h.Write([]byte(strconv.Itoa(p)))
	// A final mix: FNV's low bits alone spread short keys poorly.
	return mix(h.Sum64())
}

// MemberID makes an instance id from a name (a name like
// "executor@host.example" holds characters a key token may not; they become
// '_') and a random suffix, since two processes may share a name.
func MemberID(name string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	clean := strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r == '=' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') {
			return r
		}
		return '_'
	}, name)
	return clean + "-" + hex.EncodeToString(b[:])
}

// mix is the splitmix64 finaliser.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
