package pvesim

import "time"

// DefaultPvestatdCycle is pvestatd's cycle on Proxmox (PVE::Service::pvestatd
// updates and broadcasts every 10 s): what `converge sim`, `up` and the
// bench run with unless told otherwise. Tests state the lag they need.
const DefaultPvestatdCycle = 10 * time.Second

// pvestatd models Proxmox's status daemon. On every node it runs a cycle
// (PVE::Service::pvestatd, update_status every 10 s: update_qemu_status
// and update_lxc_status) that broadcasts, for each guest the node runs,
// what /cluster/resources then reports as name, status, maxcpu and maxmem
// (PVE::API2::Cluster's resources through PVE::API2Tools::extract_vm_stats
// reads the broadcast RRD data, keyed by vmid). Each node's daemon runs
// free, on its own phase: a guest's row is as old as its node's last
// cycle, and stays as its old node broadcast it until its new node's next
// cycle after a migration. node, lock, tags, template and pool come from
// the cluster filesystem and are live; HA state lags by CRM rounds
// (hacrm.go).
//
// Faults.ResourcesLag is the cycle (0: no daemon, the rows are live). When
// it is set, every node broadcasts at once, and node i of n then every
// cycle from i+1 n-ths of a cycle on. [Sim.Pvestatd] runs every node's
// cycle now, for tests that choose when the inventory catches up.
type pvestatd struct {
	cycle time.Duration
	stop  chan struct{}
	done  chan struct{}
}

// syncPvestatd starts, restarts or stops the daemons when the cycle in
// force changed. Caller holds s.mu.
func (s *Sim) syncPvestatd() {
	if s.closed {
		return // a faults change racing Close starts nothing Close would not stop
	}
	cycle := time.Duration(s.faults.ResourcesLag)
	if s.statd != nil && s.statd.cycle == cycle {
		return
	}
	s.stopPvestatd()
	if cycle <= 0 {
		return
	}
	now := time.Now()
	next := make([]time.Time, len(s.nodes))
	for i, n := range s.nodes {
		s.broadcast(n.name)
		next[i] = now.Add(time.Duration(i+1) * cycle / time.Duration(len(s.nodes)))
	}
	p := &pvestatd{cycle: cycle, stop: make(chan struct{}), done: make(chan struct{})}
	s.statd = p
	go s.runPvestatd(p, next)
}

// stopPvestatd stops the daemons without waiting for them (one may be
// waiting for s.mu). Caller holds s.mu.
func (s *Sim) stopPvestatd() {
	if s.statd != nil {
		close(s.statd.stop)
		s.statd = nil
	}
}

func (s *Sim) runPvestatd(p *pvestatd, next []time.Time) {
	defer close(p.done)
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		i := 0
		for j := range next {
			if next[j].Before(next[i]) {
				i = j
			}
		}
		t.Reset(time.Until(next[i]))
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		if s.statd == p {
			s.broadcast(s.nodes[i].name)
		}
		s.mu.Unlock()
		for now := time.Now(); !next[i].After(now); {
			next[i] = next[i].Add(p.cycle) // a cycle missed (a long pause) is not made up
		}
	}
}

// broadcast is one cycle of node's pvestatd: its guests' rows as they are
// now. Caller holds s.mu.
func (s *Sim) broadcast(node string) {
	for id, g := range s.guests {
		if g.node == node {
			e := g.bcast
			e.status, e.of = g.status, g
			s.rrd[id] = e
		}
	}
	for id, e := range s.rrd {
		if s.guests[id] != e.of {
			delete(s.rrd, id) // destroyed (or its vmid taken by a new guest)
		}
	}
}

// Pvestatd runs every node's pvestatd cycle now: /cluster/resources shows
// every guest as it is. Without a cycle (Faults.ResourcesLag 0) the rows
// are live anyway.
func (s *Sim) Pvestatd() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.statd == nil {
		return
	}
	for _, n := range s.nodes {
		s.broadcast(n.name)
	}
}

// broadcastRow is what /cluster/resources shows of g from the broadcast:
// known false for a guest its node has not broadcast yet. Caller holds
// s.mu.
func (s *Sim) broadcastRow(g *guest) rrdEntry {
	if s.statd == nil {
		r := g.bcast // no daemon: the live state
		r.status = g.status
		return r
	}
	if r, ok := s.rrd[g.vmid]; ok && r.of == g {
		return r
	}
	return rrdEntry{}
}

// closePvestatd stops the daemons and waits for them.
func (s *Sim) closePvestatd() {
	s.mu.Lock()
	p := s.statd
	s.closed = true
	s.stopPvestatd()
	s.mu.Unlock()
	if p != nil {
		<-p.done
	}
}
