package observer

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/pve"
)

// Guest agent addresses (doc.go, "Guest agent addresses"): for running
// QEMU guests whose config enables the agent, the observer asks the agent
// for its addresses, within their own budget (VerifyRate a second per node,
// one bucket for the cluster), and publishes them on
// pve.addresses.<cluster>.<vmid> when the set changes. They are
// informational: journalled apart from the observations actions are
// planned from and fenced on.

// AgentReader asks a QEMU guest's agent for its addresses; *pve.Client is
// one. A Proxmox the observer is given that is not one reads no addresses.
type AgentReader interface {
	AgentAddresses(ctx context.Context, ref pve.GuestRef) ([]events.GuestAddress, error)
}

var _ AgentReader = (*pve.Client)(nil)

// agentShare bounds the part of a pass's agent budget reserved first for
// the agents of guests just started (a quarter, so that they are asked
// at once); the rest goes to the longest unasked after the config reads.
const agentShare = 4

// agentBook is what the observer keeps of guests' agents.
type agentBook struct {
	loaded    bool
	readAt    map[int]time.Time         // last agent read while running (absent: never since it started)
	published map[int]*events.Addresses // the last addresses published, per vmid
	reserved  map[int]bool              // vmids whose read this pass's budget already paid
	appended  int                       // addresses events this pass journalled
	warned    bool                      // an agent read was refused for want of a privilege (logged once)
}

// agentRef is a listed guest's agent to ask, or nil: a running QEMU guest
// whose last config read enables the agent.
func agentRef(l *listed) *pve.GuestRef {
	if !l.state.read || !l.state.cfg.Agent || l.res.Kind != pve.KindQEMU || l.res.Status != "running" || l.res.Template {
		return nil
	}
	r := l.res.Ref()
	return &r
}

// agentCandidates are the listed guests whose agent is due to be asked,
// in the order they are: never asked since they started first (by vmid),
// then the longest unasked; none asked within ConfigRefresh, none whose
// read this pass already paid for (reserved).
func (o *Observer) agentCandidates(guests []listed, now time.Time) []agentAsk {
	b := &o.agents
	var out []agentAsk
	for i := range guests {
		l := &guests[i]
		ref := agentRef(l)
		if ref == nil || b.reserved[l.res.VMID] {
			continue
		}
		if at, asked := b.readAt[l.res.VMID]; !asked || now.Sub(at) >= o.cfg.ConfigRefresh {
			out = append(out, agentAsk{vmid: l.res.VMID, ref: *ref, last: at, asked: asked})
		}
	}
	slices.SortFunc(out, func(x, y agentAsk) int {
		if x.asked != y.asked {
			if !x.asked {
				return -1
			}
			return 1
		}
		return cmp.Or(x.last.Compare(y.last), cmp.Compare(x.vmid, y.vmid))
	})
	return out
}

// agentAsk is one agent to ask, and then its answer.
type agentAsk struct {
	vmid  int
	ref   pve.GuestRef
	last  time.Time
	asked bool
	got   []events.GuestAddress
	err   error
}

// reserveAgentReads runs before verification: it pays, in the order of
// agentCandidates, the agent reads of up to a quarter of the agent budget,
// so that agents are asked (those of guests just started first) before
// the longest unasked.
func (o *Observer) reserveAgentReads(guests []listed, now time.Time) {
	b := &o.agents
	clear(b.reserved)
	b.appended = 0
	if _, ok := o.px.(AgentReader); !ok {
		return
	}
	cands := o.agentCandidates(guests, now)
	n := min(len(cands), int(o.budget.TokensAt(now)), max(1, burst(o.cfg)/agentShare))
	if n > 0 && b.reserved == nil {
		b.reserved = map[int]bool{}
	}
	for _, c := range cands[:n] {
		b.reserved[c.vmid] = true
	}
	if n > 0 {
		o.budget.AllowN(now, n)
	}
}

// readAgents runs after the pass's config reads: it asks the agents
// reserveAgentReads paid for and, with what the agent budget has left,
// the next candidates, and publishes the addresses that
// changed. A guest no longer asked (stopped, agent disabled, gone) whose
// addresses were known has them published unknown. An agent that cannot
// be asked is no failure of the pass.
func (o *Observer) readAgents(ctx context.Context, guests []listed, now time.Time, st *PassStats) {
	ar, ok := o.px.(AgentReader)
	if !ok {
		return
	}
	b := &o.agents
	if !b.loaded {
		if err := o.loadAddresses(ctx); err != nil {
			o.log.Warn().Err(err).Msg("last published addresses unknown; reading guest agents next pass")
			return
		}
	}
	var asks []agentAsk
	var out []*events.Addresses
	for i := range guests {
		l := &guests[i]
		vmid := l.res.VMID
		ref := agentRef(l)
		switch {
		case ref == nil && l.state.read:
			delete(b.readAt, vmid) // asked again, first, once it runs with the agent
			why := "guest not running"
			if l.res.Status == "running" {
				why = "guest agent not enabled"
			}
			out = o.unknownAddresses(out, vmid, why, now)
		case ref != nil && b.reserved[vmid]:
			asks = append(asks, agentAsk{vmid: vmid, ref: *ref})
		}
	}
	if left := int(o.budget.TokensAt(now)); left > 0 {
		rest := o.agentCandidates(guests, now)
		if n := min(len(rest), left); n > 0 {
			o.budget.AllowN(now, n)
			asks = append(asks, rest[:n]...)
		}
	}
	askedAt := o.now()
	st.AgentReads = parallel(ctx, o.cfg.ReadConcurrency, len(asks), func(k int) {
		asks[k].got, asks[k].err = ar.AgentAddresses(ctx, asks[k].ref)
	})
	for _, a := range asks[:st.AgentReads] {
		b.readAt[a.vmid] = askedAt
		switch {
		case errors.Is(a.err, pve.ErrAgentUnavailable):
			st.AgentUnavailable++
			o.log.Debug().Int("vmid", a.vmid).Err(a.err).Msg("guest agent not answering; its addresses are unknown")
			out = o.unknownAddresses(out, a.vmid, agentReason(a.err), askedAt)
		case a.err != nil && pve.Classify(a.err) == pve.ClassUnauthorized && !b.warned:
			// Once per process: every guest's read is refused alike.
			b.warned = true
			st.AgentUnavailable++
			o.log.Warn().Int("vmid", a.vmid).Err(a.err).
				Msg("guest agent reads refused: the token needs VM.GuestAgent.Audit (PVE 9; VM.Monitor on PVE 8) for addresses")
		case a.err != nil:
			st.AgentUnavailable++
			o.log.Debug().Int("vmid", a.vmid).Err(a.err).Msg("guest agent read failed; keeping its last addresses")
		default:
			out = o.changedAddresses(out, &events.Addresses{VMID: a.vmid, Known: true, Addresses: a.got, ReadAt: askedAt})
		}
	}
	for vmid, p := range b.published {
		if _, listed := o.seen[vmid]; !listed && p.Known {
			out = o.unknownAddresses(out, vmid, "guest gone", now)
		}
	}
	for vmid := range b.readAt {
		if _, listed := o.seen[vmid]; !listed {
			delete(b.readAt, vmid)
		}
	}
	o.publishAddresses(ctx, out)
	if st.AgentReads > 0 || len(out) > 0 {
		o.log.Debug().Uint64("pass", o.pass).Int("agent_reads", st.AgentReads).Int("reserved", len(b.reserved)).
			Int("unavailable", st.AgentUnavailable).Int("changed", len(out)).Int("journalled", b.appended).
			Msg("guest agent reads")
	}
}

// agentReason is Proxmox's word for an agent that cannot be asked.
func agentReason(err error) string {
	s := err.Error()
	if r, ok := strings.CutPrefix(s, pve.ErrAgentUnavailable.Error()+": "); ok {
		return r
	}
	return s
}

// unknownAddresses adds an "unknown" report for vmid, if what was last
// published said otherwise.
func (o *Observer) unknownAddresses(out []*events.Addresses, vmid int, why string, now time.Time) []*events.Addresses {
	if p := o.agents.published[vmid]; p == nil || !p.Known {
		return out // never known, or already unknown: nothing to say
	}
	return o.changedAddresses(out, &events.Addresses{VMID: vmid, Reason: why, ReadAt: now})
}

// changedAddresses adds a if it says something else than what was last
// published for its guest.
func (o *Observer) changedAddresses(out []*events.Addresses, a *events.Addresses) []*events.Addresses {
	if events.SameAddresses(a, o.agents.published[a.VMID]) {
		return out
	}
	a.Meta, a.Cluster = events.NewMeta(o.cfg.Name, "", o.now()), o.cfg.Cluster
	return append(out, a)
}

// publishAddresses journals the changed addresses (rare: one at a time,
// waited for) and records those acknowledged; the others are published
// again after the guest's next read.
func (o *Observer) publishAddresses(ctx context.Context, out []*events.Addresses) {
	for _, a := range out {
		body, err := events.Encode(a)
		if err == nil {
			m := events.Message{Subject: events.Subject(events.KindAddresses, o.cfg.Cluster, a.VMID), Data: body}
			_, err = o.j.Append(ctx, m, journal.Expect{})
		}
		if err != nil {
			delete(o.agents.readAt, a.VMID) // asked again soon, first
			o.log.Debug().Int("vmid", a.VMID).Err(err).Msg("addresses not journalled; read again next pass")
			continue
		}
		o.agents.appended++
		o.agents.published[a.VMID] = a
		o.log.Debug().Int("vmid", a.VMID).Bool("known", a.Known).Int("addresses", len(a.Addresses)).
			Str("reason", a.Reason).Msg("guest agent addresses changed")
	}
}

// loadAddresses fills the book with the last addresses published for
// every vmid (after a restart, nothing unchanged is published again).
func (o *Observer) loadAddresses(ctx context.Context) error {
	filter := events.Prefix + "." + string(events.KindAddresses) + "." + o.cfg.Cluster + ".>"
	seqs := map[int]uint64{}
	loaded := map[int]*events.Addresses{}
	err := o.j.LastPerSubject(ctx, filter, func(e journal.Entry) {
		info, err := events.ParseSubject(e.Subject)
		if err != nil || info.Cluster != o.cfg.Cluster || info.VMID == 0 {
			return
		}
		a, err := events.Decode[events.Addresses](e.Data)
		if err != nil {
			o.log.Warn().Int("vmid", info.VMID).Uint64("seq", e.Seq).Err(err).Msg("ignoring undecodable addresses")
			return
		}
		a.VMID = info.VMID
		if e.Seq > seqs[info.VMID] {
			seqs[info.VMID], loaded[info.VMID] = e.Seq, &a
		}
	})
	if err != nil {
		return err
	}
	o.agents = agentBook{loaded: true, readAt: map[int]time.Time{}, published: loaded, reserved: o.agents.reserved}
	return nil
}
