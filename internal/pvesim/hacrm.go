package pvesim

import (
	"context"
	"fmt"
	"time"
)

// ---- a minimal HA stack (CRM + LRM) ---------------------------------------------
//
// pve-ha-manager's API only writes ha/resources.cfg or queues a CRM
// command (PVE::HA::Config::queue_crm_commands); the CRM and the LRMs act
// on them in their next rounds. The simulator does the same: a requested
// state written over the API (create, update) or a migrate request is
// acted on HADelay later (Options.HADelay, default 100ms) by a task run as
// root@pam on the guest's node: qmstart/vzstart for started,
// qmshutdown/vzshutdown for stopped and disabled, qmigrate/vzmigrate (a
// running VM online, a running container in restart mode) for migrate.
// Sim.WaitHA waits until every such action and its task have ended.

const defaultHADelay = 100 * time.Millisecond

// haCRM is the HA stack's pending work. Caller holds s.mu for all fields.
type haCRM struct {
	pending int
	idle    chan struct{} // closed when pending drops to 0
	queue   []*haAction   // actions not yet run
}

type haAction struct {
	timer *time.Timer
	act   func() *task
	ran   bool
	// sid is the resource an LRM runs the action for ("": CRM work,
	// run at once; halrm.go).
	sid string
}

func (s *Sim) haDelay() time.Duration {
	if s.opts.HADelay > 0 {
		return s.opts.HADelay
	}
	return defaultHADelay
}

// haBegin counts one action of the HA stack. Caller holds s.mu.
func (s *Sim) haBegin() {
	if s.crm == nil {
		s.crm = &haCRM{}
	}
	if s.crm.pending == 0 {
		s.crm.idle = make(chan struct{})
	}
	s.crm.pending++
}

// haEnd ends one action, after its task if it started one. Caller holds s.mu.
func (s *Sim) haEnd(t *task) {
	if t != nil && t.running {
		go func() {
			<-t.done
			s.mu.Lock()
			defer s.mu.Unlock()
			s.haEnd(nil)
		}()
		return
	}
	s.crm.pending--
	if s.crm.pending == 0 {
		close(s.crm.idle)
	}
}

// haSchedule runs act HADelay from now, as the CRM's next round, in the
// LRM of sid's node ("": CRM work). Caller holds s.mu.
func (s *Sim) haSchedule(sid string, act func() *task) {
	s.haBegin()
	a := &haAction{act: act, sid: sid}
	s.crm.queue = append(s.crm.queue, a)
	a.timer = time.AfterFunc(s.haDelay(), func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.haRun(a)
	})
}

// haRun runs a queued action once. Caller holds s.mu.
func (s *Sim) haRun(a *haAction) {
	if a.ran {
		return
	}
	a.ran = true
	for i, x := range s.crm.queue {
		if x == a {
			s.crm.queue = append(s.crm.queue[:i], s.crm.queue[i+1:]...)
			break
		}
	}
	s.lrmSubmit(s.haNodeOf(a.sid), a.act)
}

// RunHA makes the HA stack act now on everything queued (instead of
// HADelay later), as its next round would. Tests call it after checking
// that an API call returned before anything happened, then WaitHA.
func (s *Sim) RunHA() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.crm == nil {
		return
	}
	for len(s.crm.queue) > 0 {
		a := s.crm.queue[0]
		a.timer.Stop()
		s.haRun(a)
	}
}

// WaitHA blocks until the HA stack has no queued action and every task it
// started has ended (or ctx ends).
func (s *Sim) WaitHA(ctx context.Context) error {
	s.mu.Lock()
	if s.crm == nil || s.crm.pending == 0 {
		s.mu.Unlock()
		return nil
	}
	idle := s.crm.idle
	s.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// haKick makes the HA stack drive a resource towards its requested state.
// Caller holds s.mu.
func (s *Sim) haKick(sid string) {
	s.haSchedule(sid, func() *task {
		r := s.ha[sid]
		if r == nil {
			return nil
		}
		g := s.guests[r.vmid]
		if g == nil || haType(g.kind) != r.typ || g.template() || g.lock() != "" {
			return nil
		}
		prefix := map[Kind]string{QEMU: "qm", LXC: "vz"}[g.kind]
		switch r.requested() {
		case "started":
			if g.running() {
				return nil
			}
			return s.startTask(g.node, prefix+"start", g.kind, g.vmid, DefaultUser, func() ([]string, error) {
				if err := s.gone(g); err != nil {
					return nil, err
				}
				if !g.running() {
					s.powerOn(g, true)
				}
				return nil, nil
			}, nil)
		case "stopped", "disabled":
			if !g.running() {
				return nil
			}
			return s.startTask(g.node, prefix+"shutdown", g.kind, g.vmid, DefaultUser, func() ([]string, error) {
				if err := s.gone(g); err != nil {
					return nil, err
				}
				g.status, g.paused, g.pid = "stopped", false, 0
				return nil, nil
			}, nil)
		}
		return nil
	})
}

// haQueueMigrate is the CRM command "migrate <sid> <node>". Caller holds s.mu.
//
// As Manager.pm queue_resource_motion: a resource in negative affinity
// with sid on the target blocks the command (it is dropped, as the CRM
// logs an error); resources in positive affinity with sid move along.
// The target is not checked against node-affinity rules: the migration
// runs, and the CRM's next placement round moves the guest back where
// its rule wants it (next_state_started takes the command as given).
func (s *Sim) haQueueMigrate(sid, target string) {
	s.haSchedule(sid, func() *task {
		r := s.ha[sid]
		if r == nil {
			return nil
		}
		g := s.guests[r.vmid]
		n := s.nodeByName(target)
		// The CRM ignores a request for the node the service is on, or for
		// a node that is not a cluster member.
		if g == nil || n == nil || g.node == target || g.lock() != "" {
			return nil
		}
		c := s.compileRules()
		for p := range c.separate[sid] {
			if pr := s.ha[p]; pr != nil && pr.requested() != "ignored" {
				if pg := s.guests[pr.vmid]; pg != nil && pg.node == target {
					return nil
				}
			}
		}
		for _, p := range sortedSet(c.together[sid]) {
			if pr := s.ha[p]; pr != nil && pr.requested() != "ignored" {
				if pg := s.guests[pr.vmid]; pg != nil && pg.node != target && pg.lock() == "" {
					s.haStartMove(pr, pg, target, "resource-affinity", 0)
				}
			}
		}
		s.haMoves = append(s.haMoves, HAMove{SID: sid, VMID: g.vmid, From: g.node, To: target, Cause: "request"})
		if g.kind == LXC {
			return s.startCTMigration(g, n, false, true, nil, DefaultUser)
		}
		return s.startVMMigration(g, n, true, nil, DefaultUser)
	})
}

// haMigrateTask is a migrate API call on an HA-managed guest: an
// "hamigrate" task that runs "ha-manager migrate", i.e. queues the CRM
// command. Caller holds s.mu.
func (s *Sim) haMigrateTask(q *req, g *guest, r *haResource, target string) *task {
	first := []string{fmt.Sprintf("Requesting HA migration for %s %d to node %s", g.typeWord(), g.vmid, target)}
	sid := r.sid
	return s.startLoggedTask(g.node, "hamigrate", g.kind, g.vmid, q.user, first, func(func(string)) ([]string, error) {
		if s.ha[sid] == nil {
			return nil, taskFail("resource '%s' is not HA managed", sid)
		}
		s.haQueueMigrate(sid, target)
		return nil, nil
	}, nil)
}

// haMigrate is POST /cluster/ha/resources/{sid}/migrate: it only queues
// the CRM command and answers before the guest moves (null up to
// pve-ha-manager 5.0.2, PVE 7/8 here; {sid, requested-node} from 5.0.3,
// PVE 9, plus comigrated-resources and blocking-resources when rules
// give some).
func (s *Sim) haMigrate(q *req) (any, error) {
	sid := q.path("sid")
	if err := haParams(q, &sid, "node"); err != nil {
		return nil, err
	}
	target := q.str("node")
	if target == "" {
		return nil, paramErr1("node", "property is missing and it is not optional")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sid, _, _, err := s.parseSID(sid)
	if err != nil {
		return nil, err
	}
	if s.ha[sid] == nil {
		return nil, fail500("resource '%s' is not HA managed", sid)
	}
	s.haQueueMigrate(sid, target)
	if s.version.release >= "9" {
		// pve-ha-manager 5.x adds the motion info when there is some
		// (API2/HA/Resources.pm migrate: comigrated-resources,
		// blocking-resources for the requested node).
		res := map[string]any{"sid": sid, "requested-node": target}
		dependent, blocking := s.haMotionInfo(sid)
		if len(dependent) > 0 {
			res["comigrated-resources"] = dependent
		}
		if b := blocking[target]; b != nil {
			res["blocking-resources"] = b
		}
		return res, nil
	}
	return nil, nil
}
