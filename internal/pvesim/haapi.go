package pvesim

import (
	"fmt"
	"maps"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// ---- the HA resources API (PVE::API2::HA::Resources) ------------------------

func (s *Sim) haRoutes(mux *http.ServeMux) {
	s.handle(mux, "GET /cluster/ha/resources", s.haList)
	s.handle(mux, "POST /cluster/ha/resources", s.haCreate)
	s.handle(mux, "GET /cluster/ha/resources/{sid}", s.haRead)
	s.handle(mux, "PUT /cluster/ha/resources/{sid}", s.haUpdate)
	s.handle(mux, "DELETE /cluster/ha/resources/{sid}", s.haDelete)
	s.handle(mux, "POST /cluster/ha/resources/{sid}/migrate", s.haMigrate)
}

func (s *Sim) haList(q *req) (any, error) {
	if err := haParams(q, nil, "type"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	digest := s.haDigest()
	out := []map[string]any{}
	for _, r := range s.haSorted() {
		if t := q.str("type"); t != "" && t != r.typ {
			continue
		}
		out = append(out, s.haResourceJSON(r, digest, true))
	}
	return out, nil
}

// haSorted is the resources by sid. Caller holds s.mu.
func (s *Sim) haSorted() []*haResource {
	out := make([]*haResource, 0, len(s.ha))
	for _, r := range s.ha {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].sid < out[j].sid })
	return out
}

func (s *Sim) haRead(q *req) (any, error) {
	sid := q.path("sid")
	if err := haParams(q, &sid); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sid, _, _, err := s.parseSID(sid)
	if err != nil {
		return nil, err
	}
	r := s.ha[sid]
	if r == nil {
		return nil, fail500("no such resource '%s'", sid)
	}
	return s.haResourceJSON(r, s.haDigest(), false), nil
}

func (s *Sim) haCreate(q *req) (any, error) {
	sid := q.str("sid")
	if err := haParams(q, &sid, "sid", "type", "state", "comment", "group", "failback", "max_relocate", "max_restart"); err != nil {
		return nil, err
	}
	opts, err := haOptions(q)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sid, typ, name, err := s.parseSID(sid)
	if err != nil {
		return nil, err
	}
	if t := q.str("type"); t != "" && t != typ {
		return nil, fail500("types does not match")
	}
	if err := s.groupParam(q, true); err != nil {
		return nil, err
	}
	if typ != "vm" && typ != "ct" {
		return nil, fail500("unknown section type '%s'", typ)
	}
	if !haVMIDName.MatchString(name) {
		return nil, fail500("invalid VMID")
	}
	vmid, _ := strconv.Atoi(name)
	g := s.guests[vmid]
	switch {
	case g == nil:
		return nil, fail500("resource '%s' does not exist in cluster", sid)
	case typ == "vm" && g.kind != QEMU:
		return nil, fail500("resource '%s' - guest with ID %d is not a VM", sid, vmid)
	case typ == "ct" && g.kind != LXC:
		return nil, fail500("resource '%s' - guest with ID %d is not a container", sid, vmid)
	}
	if err := s.haLockFault("create resource failed"); err != nil {
		return nil, err
	}
	if s.ha[sid] != nil {
		return nil, fail500("create resource failed: resource ID '%s' already defined", sid)
	}
	s.ha[sid] = &haResource{sid: sid, typ: typ, vmid: vmid, state: q.str("state"), comment: q.str("comment"), group: q.str("group"), opts: opts}
	s.haKick(sid)
	s.haPlaceAll("node-affinity")
	return nil, nil
}

func (s *Sim) haUpdate(q *req) (any, error) {
	sid := q.path("sid")
	if err := haParams(q, &sid, "type", "state", "comment", "group", "digest", "delete", "failback", "max_relocate", "max_restart"); err != nil {
		return nil, err
	}
	opts, err := haOptions(q)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sid, typ, _, err := s.parseSID(sid)
	if err != nil {
		return nil, err
	}
	if t := q.str("type"); t != "" && t != typ {
		return nil, fail500("types does not match")
	}
	if err := s.groupParam(q, false); err != nil {
		return nil, err
	}
	const failed = "update resources config failed: "
	if err := s.haLockFault("update resources config failed"); err != nil {
		return nil, err
	}
	if d := q.str("digest"); d != "" && d != s.haDigest() {
		return nil, fail500(failed + "detected modified configuration - file changed by other user? Try again.")
	}
	r := s.ha[sid]
	if r == nil {
		return nil, fail500(failed+"no such resource '%s'", sid)
	}
	next := *r
	next.opts = maps.Clone(r.opts)
	if next.opts == nil {
		next.opts = map[string]int64{}
	}
	maps.Copy(next.opts, opts)
	if q.has("state") {
		next.state = q.str("state")
	}
	if q.has("comment") {
		next.comment = q.str("comment")
	}
	if q.has("group") {
		next.group = q.str("group")
	}
	for _, k := range strings.FieldsFunc(q.str("delete"), func(c rune) bool { return c == ',' || c == ';' || c == ' ' }) {
		switch k {
		case "state":
			next.state = ""
		case "comment":
			next.comment = ""
		case "failback", "max_restart", "max_relocate":
			delete(next.opts, k)
		case "group":
			next.group = ""
		default:
			return nil, fail500(failed+"no such option '%s'", k)
		}
	}
	*r = next
	s.haKick(sid)
	s.haPlaceAll("node-affinity")
	return nil, nil
}

func (s *Sim) haDelete(q *req) (any, error) {
	sid := q.path("sid")
	if err := haParams(q, &sid, "purge"); err != nil {
		return nil, err
	}
	purge, err := q.boolParam("purge")
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sid, _, _, err = s.parseSID(sid)
	if err != nil {
		return nil, err
	}
	if s.ha[sid] == nil {
		return nil, fail500("cannot delete service '%s', not HA managed!", sid)
	}
	if err := s.haLockFault("delete resource failed"); err != nil {
		return nil, err
	}
	// purge (default 1) arrived with pve-ha-manager 5.0.x (PVE 9).
	s.deleteHAService(sid, purge || !q.has("purge"))
	s.haPlaceAll("resource-affinity")
	return nil, nil
}

// haResourceJSON is $api_copy_config: no group once groups are migrated,
// and an error for a group that does not exist (the list only).
// Caller holds s.mu.
func (s *Sim) haResourceJSON(r *haResource, digest string, list bool) map[string]any {
	m := r.json(digest)
	if r.group != "" && !s.groupsMigrated() {
		m["group"] = r.group
		if list && s.haGroups[r.group] == nil {
			m["errors"] = map[string]string{"group": fmt.Sprintf("group '%s' does not exist", r.group)}
		}
	}
	return m
}

// deleteHAService is Config.pm delete_service_from_config: the resource
// goes; with purge the sid leaves every rule, and rules left empty go.
// Caller holds s.mu.
func (s *Sim) deleteHAService(sid string, purge bool) {
	delete(s.ha, sid)
	if !purge || len(s.haRules) == 0 {
		return
	}
	for id, r := range s.haRules {
		delete(r.resources, sid)
		if len(r.resources) == 0 {
			delete(s.haRules, id)
		}
	}
	s.haRulesWrite()
}
