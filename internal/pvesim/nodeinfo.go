package pvesim

import (
	"crypto/sha1"
	"fmt"
	"net/http"
	"strings"
)

// Cluster storage configuration, node version and node network: what
// Terraform's providers and Ansible's proxmoxer modules read before they
// act.

func (s *Sim) nodeInfoRoutes(mux *http.ServeMux) {
	s.handle(mux, "GET /storage", s.storageIndex)
	s.handle(mux, "GET /storage/{storage}", s.storageRead)
	s.handle(mux, "GET /nodes/{node}/version", s.nodeVersion)
	s.handle(mux, "GET /nodes/{node}/network", s.nodeNetwork)
	s.handle(mux, "GET /nodes/{node}/qemu/{vmid}/agent/network-get-interfaces", s.guestHandler(QEMU, s.agentNetworkInterfaces))
}

// noExtraParams refuses parameters the operation's schema does not
// declare (additionalProperties 0).
func noExtraParams(q *req, allowed ...string) error {
	errs := map[string]string{}
	for k := range q.params {
		ok := false
		for _, a := range allowed {
			ok = ok || k == a
		}
		if !ok {
			errs[k] = "property is not defined in schema and the schema does not allow additional properties"
		}
	}
	if len(errs) > 0 {
		return paramErr(errs)
	}
	return nil
}

// ---- storage.cfg -------------------------------------------------------------

// storageTypes is the "type" enumeration of GET /storage in the API schema.
var storageTypes = []string{"btrfs", "cephfs", "cifs", "dir", "esxi", "iscsi", "iscsidirect", "lvm", "lvmthin", "nfs", "pbs", "rbd", "zfs", "zfspool"}

// cfgKeys are a storage's keys in storage.cfg besides type and content, as
// a default install writes them (dir local, lvmthin local-lvm, and on a
// ZFS root zfspool local-zfs: pool rpool/data, sparse) and pveceph's pool
// create adds an RBD storage.
func (st storageDef) cfgKeys() [][2]string {
	switch st.typ {
	case "dir":
		return [][2]string{{"path", "/var/lib/vz"}}
	case "lvmthin":
		return [][2]string{{"thinpool", "data"}, {"vgname", "pve"}}
	case "rbd":
		return [][2]string{{"pool", st.name}}
	case "zfspool":
		return [][2]string{{"pool", zfsPool}, {"sparse", "1"}}
	}
	return nil
}

// storageCfgDigest is the SHA-1 of the storage.cfg the storages print to
// (PVE::SectionConfig's digest of the file).
func storageCfgDigest() string {
	var b strings.Builder
	for _, st := range storages {
		fmt.Fprintf(&b, "%s: %s\n", st.typ, st.name)
		for _, kv := range st.cfgKeys() {
			fmt.Fprintf(&b, "\t%s %s\n", kv[0], kv[1])
		}
		fmt.Fprintf(&b, "\tcontent %s\n\n", st.content)
	}
	return fmt.Sprintf("%x", sha1.Sum([]byte(b.String())))
}

// cfgJSON is pve-storage's API2/Storage/Config.pm $api_storage_config: the
// section's keys, storage, the file's digest, content encoded (sorted).
func (st storageDef) cfgJSON() map[string]any {
	m := map[string]any{"storage": st.name, "type": st.typ, "content": st.content, "digest": storageCfgDigest()}
	for _, kv := range st.cfgKeys() {
		m[kv[0]] = kv[1]
		if kv[0] == "sparse" {
			m[kv[0]] = 1 // a boolean of the schema: the API answers 1
		}
	}
	return m
}

// storageIndex is GET /storage (Config.pm "index"), with its type filter.
func (s *Sim) storageIndex(q *req) (any, error) {
	if err := noExtraParams(q, "type"); err != nil {
		return nil, err
	}
	typ := q.str("type")
	if q.has("type") {
		known := false
		for _, t := range storageTypes {
			known = known || t == typ
		}
		if !known {
			return nil, paramErr1("type", "value '%s' does not have a value in the enumeration '%s'", typ, strings.Join(storageTypes, ", "))
		}
	}
	out := []map[string]any{}
	for _, st := range storages {
		if typ == "" || st.typ == typ {
			out = append(out, st.cfgJSON())
		}
	}
	return out, nil
}

// storageRead is GET /storage/{storage} (Config.pm "read").
func (s *Sim) storageRead(q *req) (any, error) {
	if err := noExtraParams(q); err != nil {
		return nil, err
	}
	id := q.path("storage")
	if !storageIDRe.MatchString(id) {
		return nil, paramErr1("storage", "invalid format - storage ID '%s' contains illegal characters", id)
	}
	st := storageByName(id)
	if st == nil {
		return nil, fail500("storage '%s' does not exist", id) // PVE::Storage::storage_config
	}
	return st.cfgJSON(), nil
}

// ---- node version -------------------------------------------------------------

// nodeVersion is pve-manager's API2/Nodes.pm "version":
// PVE::pvecfg::version_info(), the node's pve-manager version.
func (s *Sim) nodeVersion(q *req) (any, error) {
	if err := noExtraParams(q); err != nil {
		return nil, err
	}
	if _, err := s.needNode(q); err != nil {
		return nil, err
	}
	return s.getVersion(q)
}

// ---- node network -------------------------------------------------------------

// networkTypes is the "type" enumeration of GET /nodes/{node}/network in
// the API schema.
var networkTypes = []string{"bridge", "bond", "eth", "alias", "vlan", "fabric", "OVSBridge", "OVSBond", "OVSPort", "OVSIntPort", "vnet", "any_bridge", "any_local_bridge", "include_sdn"}

// nodeNetwork is pve-manager's API2/Network.pm "index" over a default
// install's /etc/network/interfaces (one NIC eno1, the bridge vmbr0 on it
// with the node's address) as pve-common's PVE::Network::Interfaces reads
// it: lo left out, method6 manual, families [inet], bridge_stp off,
// bridge_fd "0" (read from the file), address split into address/netmask/cidr; sorted by name
// (hash_to_array). The "type" filter keeps the interfaces of that type,
// any_bridge and any_local_bridge the bridges; no SDN vnets or fabrics.
func (s *Sim) nodeNetwork(q *req) (any, error) {
	if err := noExtraParams(q, "type"); err != nil {
		return nil, err
	}
	typ := q.str("type")
	if q.has("type") {
		known := false
		for _, t := range networkTypes {
			known = known || t == typ
		}
		if !known {
			return nil, paramErr1("type", "value '%s' does not have a value in the enumeration '%s'", typ, strings.Join(networkTypes, ", "))
		}
	}
	n, err := s.needNode(q)
	if err != nil {
		return nil, err
	}
	gw := n.ip[:strings.LastIndexByte(n.ip, '.')] + ".1"
	ifaces := []map[string]any{
		{"iface": "eno1", "type": "eth", "method": "manual", "method6": "manual", "families": []string{"inet"},
			"exists": 1, "active": 1, "priority": 3},
		{"iface": "vmbr0", "type": "bridge", "method": "static", "method6": "manual", "families": []string{"inet"},
			"autostart": 1, "active": 1, "priority": 4, "bridge_ports": "eno1", "bridge_stp": "off", "bridge_fd": "0",
			"address": n.ip, "netmask": "24", "cidr": n.ip + "/24", "gateway": gw},
	}
	out := []map[string]any{}
	for _, i := range ifaces {
		t := i["type"].(string)
		switch {
		case typ == "" || typ == "include_sdn" || typ == t:
		case (typ == "any_bridge" || typ == "any_local_bridge") && t == "bridge":
		default:
			continue
		}
		out = append(out, i)
	}
	return out, nil
}
