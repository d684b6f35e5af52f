package pvesim

import (
	"context"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/converge-pve/converge/internal/pace"
)

func (s *Sim) apiRoutes(mux *http.ServeMux) {
	s.handleOpen(mux, "POST /access/ticket", s.login)
	s.handle(mux, "GET /version", s.getVersion)
	s.handle(mux, "GET /cluster/status", s.clusterStatus)
	s.handle(mux, "GET /cluster/resources", s.clusterResources)
	s.handle(mux, "GET /cluster/nextid", s.nextID)
	s.handle(mux, "GET /cluster/tasks", func(q *req) (any, error) { return s.taskList(q, "") })
	s.haRoutes(mux)
	s.haRuleRoutes(mux)
	s.haGroupRoutes(mux)
	s.handle(mux, "GET /nodes", s.listNodes)
	s.handle(mux, "GET /nodes/{node}/status", s.nodeStatus)
	s.handle(mux, "GET /nodes/{node}/tasks", func(q *req) (any, error) {
		if _, err := s.needNode(q); err != nil {
			return nil, err
		}
		return s.taskList(q, q.path("node"))
	})
	s.handle(mux, "GET /nodes/{node}/tasks/{upid}/status", s.taskStatus)
	s.handle(mux, "GET /nodes/{node}/tasks/{upid}/log", s.taskLog)
	s.handle(mux, "DELETE /nodes/{node}/tasks/{upid}", s.taskStop)
	s.handle(mux, "GET /nodes/{node}/storage", s.listStorage)
	s.handle(mux, "GET /nodes/{node}/storage/{storage}/status", s.storageStatus)
	s.handle(mux, "GET /nodes/{node}/aplinfo", s.aplinfo)
	s.compatRoutes(mux)
	s.nodeInfoRoutes(mux)
	for _, kind := range []Kind{QEMU, LXC} {
		base := "/nodes/{node}/" + string(kind)
		s.handle(mux, "GET "+base, s.kindHandler(kind, s.listGuests))
		s.handle(mux, "POST "+base, s.kindHandler(kind, s.createGuest))
		s.handle(mux, "GET "+base+"/{vmid}/status/current", s.guestHandler(kind, s.statusCurrent))
		s.handle(mux, "GET "+base+"/{vmid}/config", s.guestHandler(kind, s.getConfig))
		s.handle(mux, "PUT "+base+"/{vmid}/config", s.guestHandler(kind, s.putConfig))
		s.handle(mux, "GET "+base+"/{vmid}/pending", s.guestHandler(kind, s.getPending))
		s.handle(mux, "POST "+base+"/{vmid}/status/{action}", s.guestHandler(kind, s.power))
		s.handle(mux, "POST "+base+"/{vmid}/clone", s.guestHandler(kind, s.clone))
		s.handle(mux, "POST "+base+"/{vmid}/template", s.guestHandler(kind, s.template))
		s.handle(mux, "DELETE "+base+"/{vmid}", s.guestHandler(kind, s.destroy))
	}
	// QEMU's config POST is the asynchronous variant; LXC has none.
	s.handle(mux, "POST /nodes/{node}/qemu/{vmid}/config", s.guestHandler(QEMU, s.postConfig))
	s.opsRoutes(mux)
	s.volumeRoutes(mux)
}

func (s *Sim) clusterName() string {
	if len(s.nodes) > 1 {
		return "converge-sim"
	}
	return ""
}

func (s *Sim) needNode(q *req) (*node, error) {
	n := s.nodeByName(q.path("node"))
	if n == nil {
		name := q.path("node")
		return nil, fail500("hostname lookup '%s' failed - failed to get address info for: %s: Name or service not known", name, name)
	}
	return n, nil
}

func (s *Sim) getVersion(q *req) (any, error) {
	return map[string]any{"version": s.version.version, "release": s.version.release, "repoid": s.version.repoid}, nil
}

func (s *Sim) clusterStatus(q *req) (any, error) {
	var out []map[string]any
	if len(s.nodes) > 1 {
		out = append(out, map[string]any{"type": "cluster", "name": s.clusterName(), "id": "cluster",
			"nodes": len(s.nodes), "quorate": 1, "version": len(s.nodes) + 3})
	}
	for i, n := range s.nodes {
		out = append(out, map[string]any{"type": "node", "name": n.name, "id": "node/" + n.name,
			"nodeid": n.id, "ip": n.ip, "online": 1, "local": boolInt(i == 0), "level": ""})
	}
	return out, nil
}

// rrdEntry is what pvestatd last broadcast about a guest.
// vmResource is a guest row of GET /cluster/resources. Name, MaxCPU and
// MaxMem are left out until the guest is known to the broadcast; lock,
// tags, hastate (HA-managed guests only) and pool when empty, as Proxmox
// does.
type vmResource struct {
	ID        string   `json:"id"`
	Type      string   `json:"type"`
	VMID      int      `json:"vmid"`
	Node      string   `json:"node"`
	Name      *string  `json:"name,omitzero"`
	Status    string   `json:"status"`
	Template  int      `json:"template"`
	Lock      string   `json:"lock,omitempty"`
	Tags      string   `json:"tags,omitempty"`
	CPU       int      `json:"cpu"`
	MaxCPU    *float64 `json:"maxcpu,omitzero"`
	Mem       int64    `json:"mem"`
	MaxMem    *int64   `json:"maxmem,omitzero"`
	Disk      int      `json:"disk"`
	MaxDisk   int64    `json:"maxdisk"`
	NetIn     int      `json:"netin"`
	NetOut    int      `json:"netout"`
	DiskRead  int      `json:"diskread"`
	DiskWrite int      `json:"diskwrite"`
	Uptime    int64    `json:"uptime"`
	HAState   string   `json:"hastate,omitempty"`
	Pool      string   `json:"pool,omitempty"`
}

type rrdEntry struct {
	name, status string
	maxcpu       float64
	maxmem       int64
	known        bool
	of           *guest // the guest broadcast (a vmid may be reused)
}

// resourcesLockRows is how many guests clusterResources reads under one
// hold of s.mu (some 0.2 ms).
const resourcesLockRows = 256

func (s *Sim) clusterResources(q *req) (any, error) {
	typ := q.str("type")
	switch typ {
	case "", "vm", "storage", "node", "sdn":
	default:
		return nil, paramErr1("type", "value '%s' does not have a value in the enumeration 'vm, storage, node, sdn'", typ)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	out := make([]any, 0, len(s.guests)+2*len(s.nodes))
	if typ == "" || typ == "vm" {
		p := pace.Default(context.Background())
		ids := make([]int, 0, len(s.guests))
		for id := range s.guests {
			ids = append(ids, id)
		}
		// The rows are read in batches, letting go of s.mu in between and
		// paced (see encodeList): at 10,000 guests reading them all at once
		// held every other call to the simulator (the executors' among
		// them) for milliseconds. PVE
		// assembles this answer from caches, not from one locked snapshot,
		// either: a guest created meanwhile is left out, one destroyed
		// meanwhile is skipped.
		s.mu.Unlock()
		sort.Ints(ids)
		// Typed rows, not maps: at 10,000 guests a map per row made this
		// answer the simulator's most expensive.
		rows := make([]vmResource, len(ids))
		for i, id := range ids {
			if i%resourcesLockRows == 0 {
				if i > 0 {
					s.mu.Unlock()
					p.Step()
				}
				s.mu.Lock()
			}
			g := s.guests[id]
			if g == nil {
				continue
			}
			r := s.broadcastRow(g)
			e := &rows[i]
			*e = vmResource{ID: g.resID, Type: string(g.kind), VMID: id, Node: g.node,
				Template: boolInt(g.template()), MaxDisk: g.disk,
				// lock and tags are read live from the config, as on Proxmox.
				Lock: g.lock(), Tags: g.conf["tags"], HAState: s.haState(g), Pool: g.pool}
			if r.known {
				e.Name, e.Status, e.MaxCPU, e.MaxMem = &r.name, r.status, &r.maxcpu, &r.maxmem
				if r.status == "running" {
					e.Uptime = int64(now.Sub(g.startedAt).Seconds())
					e.Mem = r.maxmem / 4
				}
			} else {
				// New guests are unknown to the RRD until the next broadcast.
				e.Status = "unknown"
			}
			out = append(out, e)
		}
		if len(ids) == 0 {
			s.mu.Lock()
		}
	}
	if typ == "" || typ == "node" {
		for _, n := range s.nodes {
			out = append(out, map[string]any{"id": "node/" + n.name, "type": "node", "node": n.name,
				"status": "online", "maxcpu": 16, "maxmem": int64(64) << 30, "mem": int64(8) << 30, "cpu": 0.02,
				"disk": int64(10) << 30, "maxdisk": int64(100) << 30, "uptime": int64(now.Sub(s.started).Seconds()) + 86400,
				"level": "", "cgroup-mode": 2})
		}
	}
	if typ == "" || typ == "storage" {
		for _, n := range s.nodes {
			for _, st := range storages {
				out = append(out, map[string]any{"id": "storage/" + n.name + "/" + st.name, "type": "storage",
					"storage": st.name, "node": n.name, "plugintype": st.typ, "content": st.content, "shared": boolInt(st.shared),
					"status": "available", "disk": st.used, "maxdisk": st.total})
			}
		}
	}
	return out, nil
}

func (s *Sim) nextID(q *req) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q.has("vmid") {
		n, err := strconv.Atoi(q.str("vmid"))
		if err != nil || n < 100 || n > 999999999 {
			return nil, paramErr1("vmid", "type check ('integer') failed - got '%s'", q.str("vmid"))
		}
		if s.guests[n] != nil {
			return nil, paramErr1("vmid", "VM %d already exists", n)
		}
		return strconv.Itoa(n), nil
	}
	for id := 100; ; id++ {
		if s.guests[id] == nil {
			return strconv.Itoa(id), nil
		}
	}
}

func (s *Sim) listNodes(q *req) (any, error) {
	var out []map[string]any
	for _, n := range s.nodes {
		out = append(out, map[string]any{"node": n.name, "status": "online", "type": "node", "id": "node/" + n.name,
			"cpu": 0.02, "maxcpu": 16, "mem": int64(8) << 30, "maxmem": int64(64) << 30, "disk": int64(10) << 30,
			"maxdisk": int64(100) << 30, "uptime": int64(time.Since(s.started).Seconds()) + 86400, "level": "",
			"ssl_fingerprint": s.fingerpr})
	}
	return out, nil
}

func (s *Sim) nodeStatus(q *req) (any, error) {
	if _, err := s.needNode(q); err != nil {
		return nil, err
	}
	return map[string]any{
		"cpu": 0.02, "uptime": int64(time.Since(s.started).Seconds()) + 86400, "wait": 0,
		"memory":     map[string]any{"total": int64(64) << 30, "used": int64(8) << 30, "free": int64(56) << 30},
		"swap":       map[string]any{"total": int64(8) << 30, "used": 0, "free": int64(8) << 30},
		"rootfs":     map[string]any{"total": int64(100) << 30, "used": int64(10) << 30, "free": int64(90) << 30, "avail": int64(85) << 30},
		"cpuinfo":    map[string]any{"cpus": 16, "cores": 8, "sockets": 1, "model": "pvesim virtual CPU", "mhz": "3000.000", "hvm": "1", "flags": "fpu vme de pse"},
		"loadavg":    []string{"0.10", "0.08", "0.05"},
		"kversion":   "Linux 6.8.12-4-pve #1 SMP PREEMPT_DYNAMIC PMX 6.8.12-4 (2024-11-06T15:04Z) x86_64",
		"pveversion": "pve-manager/" + s.version.version + "/" + s.version.repoid,
		"ksm":        map[string]any{"shared": 0},
	}, nil
}

// appliances is a slice of the appliance index (pveam available).
var appliances = []map[string]any{
	{"template": "debian-12-standard_12.7-1_amd64.tar.zst", "type": "lxc", "package": "debian-12-standard",
		"version": "12.7-1", "os": "debian-12", "section": "system", "headline": "Debian 12 Bookworm (standard)",
		"description": "A small Debian Bookworm system including all standard packages.",
		"infopage":    "https://pve.proxmox.com/wiki/Linux_Container#pct_supported_distributions",
		"location":    "http://download.proxmox.com/images/system/debian-12-standard_12.7-1_amd64.tar.zst",
		"maintainer":  "Proxmox Support Team <support@proxmox.com>", "source": "http://download.proxmox.com/images/system",
		"sha512sum": "39f6d06e082d6a418438483da4f76092ebd0370a91bad30b82ab6d0f442234d63fe27a15569895e34d6d1e5ca50319f62637f7fb96b98dbde4f6103cf05bff6d"},
	{"template": "ubuntu-24.04-standard_24.04-2_amd64.tar.zst", "type": "lxc", "package": "ubuntu-24.04-standard",
		"version": "24.04-2", "os": "ubuntu-24.04", "section": "system", "headline": "Ubuntu 24.04 Noble (standard)",
		"description": "A small Ubuntu 24.04 Noble Numbat system including all standard packages.",
		"infopage":    "https://pve.proxmox.com/wiki/Linux_Container#pct_supported_distributions",
		"location":    "http://download.proxmox.com/images/system/ubuntu-24.04-standard_24.04-2_amd64.tar.zst",
		"maintainer":  "Proxmox Support Team <support@proxmox.com>", "source": "http://download.proxmox.com/images/system",
		"sha512sum": "4d5ab1d1d0b8bb5b9c8bb0e0c3e1b5c1a0e9d7c1f0b2a4f8e2c5d6f8a9b0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c1d2e3f4"},
	{"template": "alpine-3.20-default_20240908_amd64.tar.xz", "type": "lxc", "package": "alpine-3.20-default",
		"version": "20240908", "os": "alpine", "section": "system", "headline": "Alpine Linux 3.20 (default)",
		"description": "A small Alpine Linux system.",
		"infopage":    "https://alpinelinux.org",
		"location":    "http://download.proxmox.com/images/system/alpine-3.20-default_20240908_amd64.tar.xz",
		"maintainer":  "Proxmox Support Team <support@proxmox.com>", "source": "http://download.proxmox.com/images/system",
		"sha512sum": "1b2e3d4c5b6a7988a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2"},
}

func (s *Sim) aplinfo(q *req) (any, error) {
	if _, err := s.needNode(q); err != nil {
		return nil, err
	}
	return appliances, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
