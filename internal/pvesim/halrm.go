package pvesim

// ---- the LRM's workers --------------------------------------------------------
//
// pve-ha-manager's LRM runs each resource command (start, stop, migrate,
// relocate) in a forked worker and forks at most max_workers at once
// (src/PVE/HA/LRM.pm run_workers: "next if $count >= $max_workers";
// src/PVE/HA/Env/PVE2.pm get_max_workers: datacenter.cfg max_workers,
// default 4); the other commands wait in its queue, started as workers
// end, the longest-waiting first ($fair_sorter, start_tries). The
// simulator does the same per node: an HA action that starts a task
// holds one of its node's LRM workers until the task ends, and actions
// beyond Options.HAMaxWorkers wait their turn in arrival order. (The LRM
// looks for free workers once a second; the simulator starts the next
// action as soon as a worker ends.) A waiting action's node is the one
// its guest was on when the CRM acted.

// DefaultHAMaxWorkers is datacenter.cfg's max_workers default, as the LRM
// reads it (PVE::HA::Env::PVE2::get_max_workers).
const DefaultHAMaxWorkers = 4

// haLRM is one node's LRM workers. Caller holds s.mu.
type haLRM struct {
	busy int
	wait []func() *task
}

func (s *Sim) haMaxWorkers() int {
	switch n := s.opts.HAMaxWorkers; {
	case n == 0:
		return DefaultHAMaxWorkers
	case n < 0:
		return 0
	default:
		return n
	}
}

// lrmSubmit runs start, an HA action counted by haBegin, on node's LRM
// once it has a free worker; the action's haEnd follows its task. An
// action on no node ("") runs at once. Caller holds s.mu.
func (s *Sim) lrmSubmit(node string, start func() *task) {
	if node == "" {
		s.haEnd(start())
		return
	}
	if s.lrm == nil {
		s.lrm = map[string]*haLRM{}
	}
	l := s.lrm[node]
	if l == nil {
		l = &haLRM{}
		s.lrm[node] = l
	}
	if max := s.haMaxWorkers(); max > 0 && l.busy >= max {
		l.wait = append(l.wait, start)
		return
	}
	s.lrmStart(l, start)
}

// lrmStart runs start in one of l's workers, held until its task ends.
// Caller holds s.mu.
func (s *Sim) lrmStart(l *haLRM, start func() *task) {
	t := start()
	if t == nil || !t.running {
		s.haEnd(nil)
		s.lrmNext(l)
		return
	}
	l.busy++
	go func() {
		<-t.done
		s.mu.Lock()
		defer s.mu.Unlock()
		l.busy--
		s.haEnd(nil)
		s.lrmNext(l)
	}()
}

// lrmNext starts the waiting actions l has workers for. Caller holds s.mu.
func (s *Sim) lrmNext(l *haLRM) {
	for len(l.wait) > 0 {
		if max := s.haMaxWorkers(); max > 0 && l.busy >= max {
			return
		}
		start := l.wait[0]
		l.wait[0] = nil
		l.wait = l.wait[1:]
		s.lrmStart(l, start)
	}
}

// haNodeOf is the node of the HA resource's guest ("" if none). Caller
// holds s.mu.
func (s *Sim) haNodeOf(sid string) string {
	if r := s.ha[sid]; r != nil {
		if g := s.guests[r.vmid]; g != nil {
			return g.node
		}
	}
	return ""
}

// LRMWorkers reports, by node, the HA actions running and waiting in
// its LRM.
func (s *Sim) LRMWorkers() map[string][2]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][2]int{}
	for n, l := range s.lrm {
		out[n] = [2]int{l.busy, len(l.wait)}
	}
	return out
}
