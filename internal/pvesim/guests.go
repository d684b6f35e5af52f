package pvesim

import (
	"fmt"
	"sort"
	"strconv"
	"time"
)

type guestFunc func(q *req, g *guest) (any, error)

// awaitTask asks the handler wrapper to wait (without the lock) for a task
// for up to delay, then call then (with the lock): QEMU's background_delay.
type awaitTask struct {
	t     *task
	delay time.Duration
	then  func(finished bool) (any, error)
}

// inlineWork asks the handler wrapper to wait (without the lock) for d,
// then call then (with the lock): work Proxmox does inside the API call,
// such as qemu-server's synchronous config update, which runs the qmconfig
// worker in the request instead of forking a task.
type inlineWork struct {
	d    time.Duration
	then func() (any, error)
}

// kindHandler resolves the node for per-kind collection endpoints.
func (s *Sim) kindHandler(kind Kind, fn func(q *req, kind Kind, n *node) (any, error)) apiFunc {
	return func(q *req) (any, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		n, err := s.needNode(q)
		if err != nil {
			return nil, err
		}
		return fn(q, kind, n)
	}
}

// guestHandler resolves {node}/{kind}/{vmid} to a guest, as Proxmox does: a
// guest on another node, or of the other kind, "does not exist" here.
func (s *Sim) guestHandler(kind Kind, fn guestFunc) apiFunc {
	return func(q *req) (any, error) {
		s.mu.Lock()
		res, err := s.resolveGuest(q, kind, fn)
		s.mu.Unlock()
		if aw, ok := res.(awaitTask); ok && err == nil {
			finished := false
			timer := time.NewTimer(aw.delay)
			select {
			case <-aw.t.done:
				finished = true
			case <-timer.C:
			case <-q.r.Context().Done():
			}
			timer.Stop()
			s.mu.Lock()
			defer s.mu.Unlock()
			return aw.then(finished)
		}
		if iw, ok := res.(inlineWork); ok && err == nil {
			return s.runInline(q, iw)
		}
		return res, err
	}
}

// runInline waits out inline work, then does it. A client that goes away
// meanwhile gets no answer, but the work is still done when it is due, as
// pvedaemon finishes a request whose client disconnected.
func (s *Sim) runInline(q *req, iw inlineWork) (any, error) {
	due := time.Now().Add(iw.d)
	timer := time.NewTimer(iw.d)
	select {
	case <-timer.C:
	case <-q.r.Context().Done():
		timer.Stop()
		time.AfterFunc(time.Until(due), func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			_, _ = iw.then()
		})
		return nil, q.r.Context().Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return iw.then()
}

func (s *Sim) resolveGuest(q *req, kind Kind, fn guestFunc) (any, error) {
	n, err := s.needNode(q)
	if err != nil {
		return nil, err
	}
	vmid, err := strconv.Atoi(q.path("vmid"))
	if err != nil || vmid < 100 || vmid > 999999999 {
		return nil, paramErr1("vmid", "type check ('integer') failed - got '%s'", q.path("vmid"))
	}
	g := s.guests[vmid]
	if g == nil || g.kind != kind || g.node != n.name {
		return nil, fail500("Configuration file '%s' does not exist", confPath(kind, n.name, vmid))
	}
	return fn(q, g)
}

// gone is the error a task reports when its guest vanished meanwhile.
func (s *Sim) gone(g *guest) error {
	if s.guests[g.vmid] != g {
		return taskFail("Configuration file '%s' does not exist", confPath(g.kind, g.node, g.vmid))
	}
	return nil
}

func lockedErr(g *guest) string {
	return fmt.Sprintf("%s is locked (%s)", g.typeWord(), g.lock())
}

// ---- reads ------------------------------------------------------------------

func (s *Sim) listGuests(q *req, kind Kind, n *node) (any, error) {
	ids := []int{}
	for id, g := range s.guests {
		if g.kind == kind && g.node == n.name {
			ids = append(ids, id)
		}
	}
	sort.Ints(ids)
	out := make([]map[string]any, 0, len(ids))
	for _, id := range ids {
		out = append(out, s.statusJSON(s.guests[id], true))
	}
	return out, nil
}

// statusJSON is status/current, or a list entry (list == true).
func (s *Sim) statusJSON(g *guest, list bool) map[string]any {
	maxmem := g.bcast.maxmem
	m := map[string]any{
		"vmid": g.vmid, "name": g.bcast.name, "status": g.status, "cpus": g.bcast.maxcpu, "maxmem": maxmem,
		"maxdisk": g.disk, "disk": 0, "cpu": 0, "mem": 0, "netin": 0, "netout": 0, "diskread": 0,
		"diskwrite": 0, "uptime": 0,
	}
	if g.kind == LXC {
		m["type"] = "lxc"
		m["maxswap"] = atoiDef(g.conf["swap"], 512) << 20
	}
	if g.running() {
		m["uptime"] = int64(time.Since(g.startedAt).Seconds())
		m["pid"] = g.pid
		m["mem"] = maxmem / 4
	}
	if l := g.lock(); l != "" {
		m["lock"] = l
	}
	if t := g.conf["tags"]; t != "" {
		m["tags"] = t
	}
	if g.template() {
		m["template"] = 1
	}
	if !list {
		// PVE::HA::Config::get_service_status: ignored resources count as
		// unmanaged; state is the CRM's, here the requested one.
		if r := s.haOf(g); r != nil && r.state != "ignored" {
			m["ha"] = map[string]any{"managed": 1, "state": r.requested()}
		} else {
			m["ha"] = map[string]any{"managed": 0}
		}
		if g.kind == QEMU {
			qmp := g.status
			if g.running() && g.paused {
				qmp = "paused"
			} else if g.lock() == "suspended" {
				qmp = "stopped"
			}
			m["qmpstatus"] = qmp
			if g.running() {
				m["running-machine"] = "pc-i440fx-9.0+pve0"
				m["running-qemu"] = "9.0.2"
			}
		}
	}
	return m
}

func (s *Sim) statusCurrent(q *req, g *guest) (any, error) { return s.statusJSON(g, false), nil }
