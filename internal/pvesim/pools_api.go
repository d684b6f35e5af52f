package pvesim

import (
	"fmt"
	"maps"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Pool writes (PVE/API2/Pool.pm): each runs under lock_user_config, whose
// errors carry the call's prefix ("create pool failed: …"), and writes
// user.cfg only when every step succeeded.

var (
	poolLetterRe = regexp.MustCompile(`^[A-Za-z]`)
	vmidRe       = regexp.MustCompile(`^[1-9][0-9]{2,8}$`) // pve_verify_vmid
)

// createPool is POST /pools (poolid, comment).
func (s *Sim) createPool(q *req) (any, error) {
	id, err := q.poolID()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fail := func(format string, a ...any) error {
		return fail500("create pool failed: %s", fmt.Sprintf(format, a...))
	}
	if s.pools[id] != nil {
		return nil, fail("pool '%s' already exists", id)
	}
	leaf := id
	if i := strings.LastIndexByte(id, '/'); i >= 0 {
		parent := id[:i]
		if s.pools[parent] == nil {
			return nil, fail("parent '%s' of pool '%s' does not exist", parent, id)
		}
		leaf = id[i+1:]
	}
	if !poolLetterRe.MatchString(leaf) {
		return nil, fail("pool name must start with a letter")
	}
	if s.roll(s.faults.FailRate) {
		return nil, fail("cfs-lock 'file-user_cfg' error: got lock request timeout")
	}
	p := newPool()
	if c := q.str("comment"); c != "" && c != "0" { // set only when true to Perl
		p.comment, p.hasComm = c, true
	}
	s.pools[id] = p
	return nil, nil
}

// updatePool is PUT /pools/{poolid} (and PUT /pools with poolid from PVE
// 8.1): comment, then vms and storage added, or removed with delete;
// adding a guest that is in another pool needs allow-move.
func (s *Sim) updatePool(q *req) (any, error) {
	id, err := q.poolID()
	if err != nil {
		return nil, err
	}
	del, err := q.boolParam("delete")
	if err != nil {
		return nil, err
	}
	move, err := q.boolParam("allow-move")
	if err != nil {
		return nil, err
	}
	var vmids []int
	for _, v := range splitList(q.str("vms")) {
		n, err := strconv.Atoi(v)
		if err != nil || !vmidRe.MatchString(v) {
			return nil, paramErr1("vms", "invalid format - value does not look like a valid VM ID")
		}
		vmids = append(vmids, n)
	}
	stores := splitList(q.str("storage"))
	for _, st := range stores {
		if !storageIDRe.MatchString(st) {
			return nil, paramErr1("storage", "invalid format - storage ID '%s' contains illegal characters", st)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fail := func(format string, a ...any) error {
		return fail500("update pools failed: %s", fmt.Sprintf(format, a...))
	}
	p := s.pools[id]
	if p == nil {
		return nil, fail("pool '%s' does not exist", id)
	}
	// Work on copies: user.cfg is written only at the end.
	vms, storage, vmPool := maps.Clone(p.vms), maps.Clone(p.storage), maps.Clone(s.vmPool)
	for _, vmid := range vmids {
		switch {
		case del && !vms[vmid]:
			return nil, fail("VM %d is not a pool member", vmid)
		case del:
			delete(vms, vmid)
			delete(vmPool, vmid)
		case vms[vmid]:
			return nil, fail("VM %d is already a pool member", vmid)
		default:
			if other, in := vmPool[vmid]; in && !move {
				return nil, fail("VM %d belongs already to pool '%s' and 'allow-move' is not set", vmid, other)
			}
			vms[vmid], vmPool[vmid] = true, id
		}
	}
	for _, st := range stores {
		switch {
		case del && !storage[st]:
			return nil, fail("Storage '%s' is not a pool member", st)
		case del:
			delete(storage, st)
		case storage[st]:
			return nil, fail("Storage '%s' is already a pool member", st)
		default:
			storage[st] = true
		}
	}
	if s.roll(s.faults.FailRate) {
		return nil, fail("cfs-lock 'file-user_cfg' error: got lock request timeout")
	}
	if q.has("comment") {
		p.comment, p.hasComm = q.str("comment"), true
	}
	p.storage = storage
	changed := map[int]bool{}
	for vmid := range s.vmPool {
		changed[vmid] = true
	}
	for vmid := range vmPool {
		changed[vmid] = true
	}
	for vmid := range changed {
		if s.vmPool[vmid] != vmPool[vmid] {
			s.setVMPool(vmid, vmPool[vmid])
		}
	}
	return nil, nil
}

// deletePool is DELETE /pools/{poolid} (and DELETE /pools with poolid
// from PVE 8.1): only an empty pool, where destroyed guests and removed
// storages do not count.
func (s *Sim) deletePool(q *req) (any, error) {
	id, err := q.poolID()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fail := func(format string, a ...any) error {
		return fail500("delete pool failed: %s", fmt.Sprintf(format, a...))
	}
	p := s.pools[id]
	if p == nil {
		return nil, fail("pool '%s' does not exist", id)
	}
	for _, sub := range sortedKeys(s.pools) {
		if strings.HasPrefix(sub, id+"/") && !strings.Contains(sub[len(id)+1:], "/") {
			return nil, fail("pool '%s' is not empty (contains pool '%s')", id, sub)
		}
	}
	ids := []string{}
	for vmid := range p.vms {
		ids = append(ids, strconv.Itoa(vmid))
	}
	sort.Strings(ids)
	for _, sid := range ids {
		if vmid, _ := strconv.Atoi(sid); s.guests[vmid] != nil {
			return nil, fail("pool '%s' is not empty (contains VM %d)", id, vmid)
		}
	}
	for _, st := range sortedKeys(p.storage) {
		if storageByName(st) != nil {
			return nil, fail("pool '%s' is not empty (contains storage '%s')", id, st)
		}
	}
	if s.roll(s.faults.FailRate) {
		return nil, fail("cfs-lock 'file-user_cfg' error: got lock request timeout")
	}
	for vmid := range p.vms {
		delete(s.vmPool, vmid)
	}
	delete(s.pools, id)
	return nil, nil
}
