package pvesim

import (
	"fmt"
	"regexp"
	"sort"
)

// ---- resource pools -----------------------------------------------------------

// poolIDRe is the pve-poolid format (pve-access-control
// PVE::AccessControl::verify_poolname; nested pools since PVE 8.1).
var poolIDRe = regexp.MustCompile(`^[A-Za-z0-9.\-_]+(?:/[A-Za-z0-9.\-_]+){0,2}$`)

// AddPool creates a resource pool, as "pveum pool add" would. Clones can
// then join it with their "pool" parameter.
func (s *Sim) AddPool(id string) error {
	if !poolIDRe.MatchString(id) {
		return fmt.Errorf("pvesim: pool name %q contains invalid characters", id)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pools[id] {
		return fmt.Errorf("pvesim: pool %q already exists", id)
	}
	s.pools[id] = true
	return nil
}

// Pools lists the resource pools, sorted.
func (s *Sim) Pools() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.pools))
	for p := range s.pools {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// poolParam checks an API call's "pool" parameter: its format (a 400, as
// the pve-poolid schema format answers) and that the pool exists
// (RPCEnvironment::check_pool_exist raises a permission exception: 403
// "Permission check failed (pool 'x' does not exist)"). Caller holds s.mu.
func (s *Sim) poolParam(q *req) (string, error) {
	if !q.has("pool") {
		return "", nil
	}
	p := q.str("pool")
	if !poolIDRe.MatchString(p) {
		return "", paramErr1("pool", "invalid format - pool name '%s' contains invalid characters", p)
	}
	if !s.pools[p] {
		return "", &apiError{status: 403, msg: fmt.Sprintf("Permission check failed (pool '%s' does not exist)", p)}
	}
	return p, nil
}
