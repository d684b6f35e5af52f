package pvesim

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// ---- HA resources (pve-ha-manager) -------------------------------------------
//
// The simulator keeps ha/resources.cfg and serves /cluster/ha/resources as
// PVE::API2::HA::Resources does. There is no CRM or LRM: nothing acts on the
// requested states, and a guest's hastate is its requested state.

// haResource is one section of ha/resources.cfg. state and comment are as
// configured: "" means unset (state then defaults to started).
type haResource struct {
	sid, typ       string
	vmid           int
	state, comment string
	// group is the HA group (ha/groups.cfg), "" for none.
	group string
	// opts are the resource options kept as configured, by name: max_restart,
	// max_relocate (integers, minimum 0) and failback (boolean, 0/1).
	opts map[string]int64
}

// haOptionNames are the options of an HA resource the simulator keeps
// but does not act on (API schema: POST /cluster/ha/resources).
var haOptionNames = []string{"failback", "max_relocate", "max_restart"}

// haOptions reads the options of haOptionNames a create or update sets, as
// their schema types them: a 400 naming each bad one.
func haOptions(q *req) (map[string]int64, error) {
	out := map[string]int64{}
	errs := map[string]string{}
	for _, k := range haOptionNames {
		v, ok := q.params[k]
		if !ok {
			continue
		}
		if k == "failback" {
			b, ok := parseBool(v)
			if !ok {
				errs[k] = fmt.Sprintf("type check ('boolean') failed - got '%s'", v)
			}
			out[k] = int64(boolInt(b))
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		switch {
		case err != nil:
			errs[k] = fmt.Sprintf("type check ('integer') failed - got '%s'", v)
		case n < 0:
			errs[k] = "value must have a minimum value of 0"
		}
		out[k] = n
	}
	if len(errs) > 0 {
		return nil, paramErr(errs)
	}
	return out, nil
}

// HAResource is an HA resource of the simulated cluster.
type HAResource struct {
	SID  string `json:"sid"`  // "vm:100", "ct:101"
	Type string `json:"type"` // vm | ct
	VMID int    `json:"vmid"`
	// State is the requested state as configured: started, stopped,
	// enabled (an alias of started), disabled, ignored, or "" when unset
	// (Proxmox then takes started).
	State   string `json:"state,omitempty"`
	Comment string `json:"comment,omitempty"`
}

var haStates = []string{"started", "stopped", "enabled", "disabled", "ignored"}

// haType is the HA resource type of a guest kind
// (PVE::HA::Tools::get_ha_resource_type).
func haType(k Kind) string {
	if k == LXC {
		return "ct"
	}
	return "vm"
}

// requested is the state the HA stack acts on: unset and "enabled" mean
// started (PVE::HA::Config::read_and_check_resources_config).
func (r *haResource) requested() string {
	if r.state == "" || r.state == "enabled" {
		return "started"
	}
	return r.state
}

func (r *haResource) info() HAResource {
	return HAResource{SID: r.sid, Type: r.typ, VMID: r.vmid, State: r.state, Comment: r.comment}
}

// haOf returns the HA resource managing g, or nil. Caller holds s.mu.
func (s *Sim) haOf(g *guest) *haResource {
	if len(s.ha) == 0 {
		return nil
	}
	return s.ha[haType(g.kind)+":"+strconv.Itoa(g.vmid)]
}

// haState is what /cluster/resources shows as a guest's hastate: without a
// CRM, its requested state; "" when HA does not manage it.
func (s *Sim) haState(g *guest) string {
	if r := s.haOf(g); r != nil {
		return r.requested()
	}
	return ""
}

// AddHAResource puts a guest under HA with a requested state ("" leaves it
// unset, which Proxmox takes as started), as "ha-manager add" does.
func (s *Sim) AddHAResource(vmid int, state string) error {
	if state != "" && !validHAState(state) {
		return fmt.Errorf("pvesim: HA state %q is none of %s", state, strings.Join(haStates, ", "))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.guests[vmid]
	if g == nil {
		return fmt.Errorf("pvesim: no guest %d", vmid)
	}
	typ := haType(g.kind)
	sid := typ + ":" + strconv.Itoa(vmid)
	if s.ha[sid] != nil {
		return fmt.Errorf("pvesim: HA resource %s already defined", sid)
	}
	s.ha[sid] = &haResource{sid: sid, typ: typ, vmid: vmid, state: state}
	return nil
}

// HAResources returns a copy of the HA resources, by sid.
func (s *Sim) HAResources() []HAResource {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]HAResource, 0, len(s.ha))
	for _, r := range s.haSorted() {
		out = append(out, r.info())
	}
	return out
}

func validHAState(st string) bool {
	for _, x := range haStates {
		if st == x {
			return true
		}
	}
	return false
}

// haDigest is the SHA-1 of ha/resources.cfg as it would be written.
// Caller holds s.mu.
func (s *Sim) haDigest() string {
	sids := make([]string, 0, len(s.ha))
	for sid := range s.ha {
		sids = append(sids, sid)
	}
	sort.Strings(sids)
	var b strings.Builder
	for _, sid := range sids {
		r := s.ha[sid]
		fmt.Fprintf(&b, "%s: %d\n", r.typ, r.vmid)
		if r.comment != "" {
			fmt.Fprintf(&b, "\tcomment %s\n", r.comment)
		}
		if r.group != "" {
			fmt.Fprintf(&b, "\tgroup %s\n", r.group)
		}
		if r.state != "" {
			fmt.Fprintf(&b, "\tstate %s\n", r.state)
		}
		for _, k := range haOptionNames {
			if n, ok := r.opts[k]; ok {
				fmt.Fprintf(&b, "\t%s %d\n", k, n)
			}
		}
		b.WriteString("\n")
	}
	sum := sha1.Sum([]byte(b.String()))
	return hex.EncodeToString(sum[:])
}

// haJSON is a resource as the API returns it: its section's options plus
// sid and the file's digest.
func (r *haResource) json(digest string) map[string]any {
	m := map[string]any{"sid": r.sid, "type": r.typ, "digest": digest}
	if r.state != "" {
		m["state"] = r.state
	}
	if r.comment != "" {
		m["comment"] = r.comment
	}
	for k, n := range r.opts {
		m[k] = n
	}
	return m
}

// sidFormat is the pve-ha-resource-or-vm-id format (PVE::HA::Tools).
var sidFormat = regexp.MustCompile(`^([a-z]+:\S+|\d+)$`)

var sidParts = regexp.MustCompile(`^(\S+):(\S+)$`)

// haVMIDName is what PVE::HA::Resources::PVEVM/PVECT::verify_name accept.
var haVMIDName = regexp.MustCompile(`^[1-9][0-9]+$`)

// haParams checks the parameters of an HA call against its schema: only
// the known ones, the sid (if the call has one: nil for the list) in its
// format, state in its enumeration, comment at most 4096 characters.
func haParams(q *req, sid *string, allowed ...string) error {
	errs := map[string]string{}
	known := map[string]bool{}
	for _, k := range allowed {
		known[k] = true
	}
	for k := range q.params {
		if !known[k] {
			errs[k] = "property is not defined in schema and the schema does not allow additional properties"
		}
	}
	switch {
	case sid == nil:
	case *sid == "":
		errs["sid"] = "property is missing and it is not optional"
	case !sidFormat.MatchString(*sid):
		errs["sid"] = "value does not look like a valid ha resource id"
	}
	if q.has("state") && !validHAState(q.str("state")) {
		errs["state"] = fmt.Sprintf("value '%s' does not have a value in the enumeration '%s'", q.str("state"), strings.Join(haStates, ", "))
	}
	if t := q.str("type"); q.has("type") && t != "ct" && t != "vm" {
		errs["type"] = fmt.Sprintf("value '%s' does not have a value in the enumeration 'ct, vm'", t)
	}
	if len(q.str("comment")) > 4096 {
		errs["comment"] = "value may only be 4096 characters long"
	}
	if len(errs) > 0 {
		return paramErr(errs)
	}
	return nil
}

// haLockFault is an injected failure (Faults.FailRate) of a write to
// ha/resources.cfg: its domain lock timing out, reported with the call's
// prefix (PVE::HA::Config::lock_ha_domain), or Faults.FailMessage. Caller
// holds s.mu.
func (s *Sim) haLockFault(prefix string) error {
	if !s.roll(s.faults.FailRate) {
		return nil
	}
	if s.faults.FailMessage != "" {
		return fail500("%s", s.faults.FailMessage)
	}
	return fail500("%s: cfs-lock 'domain-ha' error: got lock request timeout", prefix)
}

// parseSID resolves a sid or a bare vmid to (sid, type, name), as
// PVE::HA::Config::parse_sid does. Caller holds s.mu.
func (s *Sim) parseSID(sid string) (string, string, string, error) {
	if n, err := strconv.Atoi(sid); err == nil && !strings.ContainsAny(sid, "+-") {
		g := s.guests[n]
		if g == nil {
			return "", "", "", fail500("unable to detect SID from VMID - VM/CT %s does not exist", sid)
		}
		typ := haType(g.kind)
		return typ + ":" + sid, typ, sid, nil
	}
	m := sidParts.FindStringSubmatch(sid)
	if m == nil {
		return "", "", "", fail500("unable to parse service id '%s'", sid)
	}
	return sid, m[1], m[2], nil
}
