package pvesim

import (
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ---- resource pools -----------------------------------------------------------
//
// user.cfg's pools, as pve-manager's PVE/API2/Pool.pm and
// pve-access-control's AccessControl.pm keep them: each pool has a comment
// and guest and storage members; a guest belongs to at most one pool
// (user.cfg's vms map, which may name guests that do not exist). The
// membership shows as the pool field of /cluster/resources.

type poolDef struct {
	comment string
	hasComm bool
	vms     map[int]bool
	storage map[string]bool
}

// poolIDRe is the pve-poolid format (pve-access-control
// PVE::AccessControl::verify_poolname; nested pools since PVE 8.1).
var poolIDRe = regexp.MustCompile(`^[A-Za-z0-9.\-_]+(?:/[A-Za-z0-9.\-_]+){0,2}$`)

// storageIDRe is pve-storage-id (PVE::JSONSchema::parse_storage_id).
var storageIDRe = regexp.MustCompile(`^(?i:[a-z][a-z0-9\-_.]*[a-z0-9])$`)

func poolIDErr(field, id string) error {
	if strings.Count(id, "/") > 2 {
		return paramErr1(field, "invalid format - pool name '%s' nested too deeply (max levels = 3)", id)
	}
	if !poolIDRe.MatchString(id) {
		return paramErr1(field, "invalid format - pool name '%s' contains invalid characters", id)
	}
	return nil
}

// AddPool creates a resource pool, as "pveum pool add" would. Clones can
// then join it with their "pool" parameter.
func (s *Sim) AddPool(id string) error {
	if !poolIDRe.MatchString(id) {
		return fmt.Errorf("pvesim: pool name %q contains invalid characters", id)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pools[id] != nil {
		return fmt.Errorf("pvesim: pool %q already exists", id)
	}
	s.pools[id] = newPool()
	return nil
}

func newPool() *poolDef { return &poolDef{vms: map[int]bool{}, storage: map[string]bool{}} }

// Pools lists the resource pools, sorted.
func (s *Sim) Pools() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sortedKeys(s.pools)
}

// PoolInfo is a pool as a test sees it.
type PoolInfo struct {
	Comment string
	VMs     []int // members by vmid, also those that do not exist
	Storage []string
}

// Pool reports a pool (false if it does not exist).
func (s *Sim) Pool(id string) (PoolInfo, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pools[id]
	if p == nil {
		return PoolInfo{}, false
	}
	pi := PoolInfo{Comment: p.comment, Storage: sortedKeys(p.storage)}
	for id := range p.vms {
		pi.VMs = append(pi.VMs, id)
	}
	sort.Ints(pi.VMs)
	return pi, true
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
	if s.pools[p] == nil {
		return "", &apiError{status: 403, msg: fmt.Sprintf("Permission check failed (pool '%s' does not exist)", p)}
	}
	return p, nil
}

// setVMPool makes vmid a member of pool ("" for none), in user.cfg and on
// the guest if it exists. Caller holds s.mu.
func (s *Sim) setVMPool(vmid int, pool string) {
	if old := s.vmPool[vmid]; old != "" && s.pools[old] != nil {
		delete(s.pools[old].vms, vmid)
	}
	delete(s.vmPool, vmid)
	if p := s.pools[pool]; p != nil {
		p.vms[vmid] = true
		s.vmPool[vmid] = pool
	}
	if g := s.guests[vmid]; g != nil {
		g.pool = s.vmPool[vmid]
	}
}

func (s *Sim) poolRoutes(mux *http.ServeMux) {
	s.handle(mux, "GET /pools", s.poolIndex)
	s.handle(mux, "POST /pools", s.createPool)
	s.handle(mux, "GET /pools/{poolid}", s.readPool)
	s.handle(mux, "PUT /pools/{poolid}", s.updatePool)
	s.handle(mux, "DELETE /pools/{poolid}", s.deletePool)
	// PVE 8.1 added the poolid parameter forms, for nested pools.
	if !s.version.memoryAsNumber {
		s.handle(mux, "PUT /pools", s.updatePool)
		s.handle(mux, "DELETE /pools", s.deletePool)
	}
}

// poolID is the pool the call names: {poolid} in the path, else the
// poolid parameter.
func (q *req) poolID() (string, error) {
	id := q.path("poolid")
	if id == "" {
		if !q.has("poolid") {
			return "", paramErr1("poolid", "property is missing and it is not optional")
		}
		id = q.str("poolid")
	}
	return id, poolIDErr("poolid", id)
}

// poolIndex is GET /pools: every pool (poolid, comment), or on PVE 8.1+
// with poolid the one pool with its members, as a one-element list.
func (s *Sim) poolIndex(q *req) (any, error) {
	if q.has("poolid") || q.has("type") {
		if s.version.memoryAsNumber {
			k := "poolid"
			if !q.has("poolid") {
				k = "type"
			}
			return nil, paramErr1(k, "property is not defined in schema and the schema does not allow additional properties")
		}
		if !q.has("poolid") {
			return nil, paramErr1("poolid", "parameter is missing and it is required by 'type'")
		}
		p, err := s.poolWithMembers(q)
		if err != nil {
			return nil, err
		}
		return []any{p}, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []map[string]any{}
	for _, id := range sortedKeys(s.pools) {
		e := map[string]any{"poolid": id}
		if p := s.pools[id]; p.hasComm {
			e["comment"] = p.comment
		}
		out = append(out, e)
	}
	return out, nil
}

// readPool is GET /pools/{poolid}.
func (s *Sim) readPool(q *req) (any, error) {
	p, err := s.poolWithMembers(q)
	if err != nil {
		return nil, err
	}
	if s.version.memoryAsNumber { // PVE 7 answered without poolid
		delete(p, "poolid")
	}
	return p, nil
}

// poolWithMembers is the pool with its members: guests in vmid order as
// strings sort (Perl's sort keys), skipping those that do not exist, as
// extract_vm_stats rows; then storages as extract_storage_stats rows on
// the first node.
func (s *Sim) poolWithMembers(q *req) (map[string]any, error) {
	id, err := q.poolID()
	if err != nil {
		return nil, err
	}
	typ := q.str("type")
	if q.has("type") {
		if err := enumParam("type", typ, []string{"qemu", "lxc", "storage"}); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pools[id]
	if p == nil {
		return nil, fail500("pool '%s' does not exist", id)
	}
	ids := []string{}
	for vmid := range p.vms {
		ids = append(ids, strconv.Itoa(vmid))
	}
	sort.Strings(ids)
	members := []any{}
	now := time.Now()
	for _, sid := range ids {
		vmid, _ := strconv.Atoi(sid)
		g := s.guests[vmid]
		if g == nil || (typ != "" && typ != string(g.kind)) {
			continue
		}
		members = append(members, s.memberRow(g, now))
	}
	if typ == "" || typ == "storage" {
		node := s.nodes[0].name
		for _, sid := range sortedKeys(p.storage) {
			st := storageByName(sid)
			if st == nil {
				continue
			}
			members = append(members, map[string]any{"id": "storage/" + node + "/" + sid, "storage": sid,
				"node": node, "type": "storage", "plugintype": st.typ, "status": "available",
				"shared": boolInt(st.shared), "content": st.content, "maxdisk": st.total, "disk": st.used})
		}
	}
	out := map[string]any{"poolid": id, "members": members}
	if p.hasComm {
		out["comment"] = p.comment
	}
	return out, nil
}

// memberRow is API2Tools::extract_vm_stats: what the RRD broadcast knows
// of a guest (status "unknown" until it knows it). Caller holds s.mu.
func (s *Sim) memberRow(g *guest, now time.Time) map[string]any {
	m := map[string]any{"id": g.resID, "vmid": g.vmid, "node": g.node, "type": string(g.kind), "status": "unknown"}
	r := s.broadcastRow(g)
	if !r.known {
		return m
	}
	var uptime, mem int64
	if r.status == "running" {
		uptime, mem = int64(now.Sub(g.startedAt).Seconds()), r.maxmem/4
	}
	for k, v := range map[string]any{"uptime": uptime, "name": r.name, "status": r.status,
		"template": boolInt(g.template()), "maxcpu": r.maxcpu, "cpu": 0, "maxmem": r.maxmem, "mem": mem,
		"maxdisk": g.disk, "disk": 0, "netin": 0, "netout": 0, "diskread": 0, "diskwrite": 0} {
		m[k] = v
	}
	return m
}
