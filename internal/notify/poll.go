package notify

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/lease"
	"github.com/converge-pve/converge/internal/planloop"
	"github.com/converge-pve/converge/internal/views"
)

// Readiness conditions (role-not-ready).
const (
	CondNoPlanner          = "no-planner"
	CondNoExecutor         = "no-executor"
	CondProxmoxUnreachable = "proxmox-unreachable"
	CondObserverSilent     = "observer-silent"
)

// pollRecord is what the poller saw last (in the notifier's bucket, so
// that a restart compares with it: a loss while the notifier was down is
// still found).
type pollRecord struct {
	// Executors are the live executor members and the partitions each
	// held.
	Executors map[string][]int `json:"executors"`
	// Active are the readiness conditions in force; Entered how often
	// each was entered (the notices' keys count them).
	Active  []string       `json:"active,omitempty"`
	Entered map[string]int `json:"entered,omitempty"`
	// Pending are conditions in force for less than the grace, since when.
	Pending map[string]time.Time `json:"pending,omitempty"`
	// Lost counts each executor member's losses (the lost notices' keys
	// count them: a member cut off, back with the same id and lost again
	// is a new notice).
	Lost map[string]int `json:"lost,omitempty"`
	// At is when this reading was made.
	At time.Time `json:"at,omitzero"`
}

// leaseState is one read of the leases bucket and the cluster document.
type leaseState struct {
	executors map[string][]int
	planners  int
	// left are the vanished members that left gracefully (a delete
	// marker) rather than expired.
	left    map[string]bool
	cluster *views.ClusterDoc
	now     time.Time
	leases  jetstream.Stream // nil while the bucket does not exist
	ttl     time.Duration    // the leases bucket's TTL (0: unknown)
}

// heldStill is what each live member is taken to hold: its leases now,
// and those it held at the previous read that nobody holds now. A killed
// executor's partition leases can expire a poll before its membership
// does (they are renewed after it each round): they are still its when
// its loss is told (CI found the partition notices missing under load).
// A partition another member took is not.
func heldStill(prev, cur map[string][]int) map[string][]int {
	owned := map[int]bool{}
	for _, ps := range cur {
		for _, p := range ps {
			owned[p] = true
		}
	}
	out := make(map[string][]int, len(cur))
	for m, ps := range cur {
		ps = slices.Clone(ps)
		for _, p := range prev[m] {
			if !owned[p] {
				ps = append(ps, p)
			}
		}
		slices.Sort(ps)
		out[m] = ps
	}
	return out
}

// pollNotices compares a read with the previous record: the notices to
// send and the record to keep. silent is how long without a heartbeat
// makes the observer silent (0: 3 of its intervals, at least 15s); a
// condition is entered once it held for grace (roles starting beside the
// notifier are not "not ready").
func pollNotices(cluster string, prev pollRecord, cur leaseState, silent, grace time.Duration) ([]Notice, pollRecord) {
	next := pollRecord{Executors: heldStill(prev.Executors, cur.executors), Entered: maps.Clone(prev.Entered), Pending: map[string]time.Time{},
		Lost: maps.Clone(prev.Lost), At: cur.now}
	if next.Entered == nil {
		next.Entered = map[string]int{}
	}
	if next.Lost == nil {
		next.Lost = map[string]int{}
	}
	at := cur.now.UTC().Truncate(time.Second)
	var out []Notice
	members := make([]string, 0, len(prev.Executors))
	for m := range prev.Executors {
		members = append(members, m)
	}
	slices.Sort(members)
	for _, m := range members {
		if _, live := cur.executors[m]; live || cur.left[m] {
			continue
		}
		next.Lost[m]++
		episode := strconv.Itoa(next.Lost[m])
		out = append(out, Notice{Key: cluster + "/executor/" + m + "/lost/" + episode, Trigger: TriggerExecutorLost, Cluster: cluster, Member: m, At: at,
			Text: fmt.Sprintf("executor %s (%s) lost: its lease membership expired without it leaving", m, cluster)})
		for _, p := range prev.Executors[m] {
			out = append(out, Notice{Key: cluster + "/partition/" + strconv.Itoa(p) + "/lost/" + m + "/" + episode,
				Trigger: TriggerPartitionLost,
				Cluster: cluster, Member: m, Partition: &p, At: at,
				Text: fmt.Sprintf("partition %d (%s) lost with executor %s; a live executor takes it over", p, cluster, m)})
		}
	}
	var active []string
	if cur.planners == 0 {
		active = append(active, CondNoPlanner)
	}
	if len(cur.executors) == 0 {
		active = append(active, CondNoExecutor)
	}
	if d := cur.cluster; d != nil && !d.State.HeartbeatAt.IsZero() {
		if !d.State.Reachable {
			active = append(active, CondProxmoxUnreachable)
		}
		wait := silent
		if wait <= 0 {
			wait = max(3*d.State.Interval, 15*time.Second)
		}
		// Without a planner the document is not rewritten: its heartbeat
		// says nothing of the observer then.
		if cur.planners > 0 && cur.now.Sub(d.State.HeartbeatAt) > wait {
			active = append(active, CondObserverSilent)
		}
	}
	for _, c := range active {
		if slices.Contains(prev.Active, c) {
			next.Active = append(next.Active, c)
			continue
		}
		since, ok := prev.Pending[c]
		if !ok {
			since = cur.now
		}
		if cur.now.Sub(since) < grace {
			next.Pending[c] = since
			continue
		}
		next.Active = append(next.Active, c)
		next.Entered[c]++
		out = append(out, Notice{Key: cluster + "/role/" + c + "/" + strconv.Itoa(next.Entered[c]), Trigger: TriggerRoleNotReady,
			Cluster: cluster, Condition: c, At: at, Text: fmt.Sprintf("converge (%s) not ready: %s", cluster, condText(c))})
	}
	return out, next
}

func condText(c string) string {
	switch c {
	case CondNoPlanner:
		return "no planner is running (none holds a lease): guests' views and plans are not updated"
	case CondNoExecutor:
		return "no executor is running (none holds a lease): no action is carried out"
	case CondProxmoxUnreachable:
		return "the observer cannot reach Proxmox VE"
	case CondObserverSilent:
		return "the observer has not reported for a while"
	}
	return c
}

// poller finds lost executors and readiness conditions each Poll, and
// records each notice once in the bucket, where every route reads it.
type poller struct {
	n *Notifier
	// lost stops the notifier: its owner key was taken over.
	lost context.CancelCauseFunc
}

func (p poller) run(ctx context.Context) {
	t := time.NewTicker(time.Duration(p.n.cfg.Poll))
	defer t.Stop()
	for {
		if err := p.once(ctx); err != nil && ctx.Err() == nil {
			p.n.log.Warn().Err(err).Msg("notify: leases and cluster document not read; trying again")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (p poller) once(ctx context.Context) error {
	n := p.n
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := n.renew(ctx); err != nil {
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			p.lost(err)
		}
		return err
	}
	cur, err := p.read(ctx)
	if err != nil {
		return err
	}
	var prev pollRecord
	if _, err := getJSON(ctx, n.kv, pollKey(n.cluster), &prev); err != nil {
		return err
	}
	if err := p.leftGracefully(ctx, &cur, prev); err != nil {
		return err
	}
	notices, next := pollNotices(n.cluster, prev, cur, time.Duration(n.cfg.ObserverSilent), time.Duration(n.cfg.ConditionGrace))
	for _, nt := range notices {
		b, err := json.Marshal(nt)
		if err != nil {
			return err
		}
		// Created once: a crash before the record below is written finds
		// the same notices again, and they exist already.
		if _, err := n.kv.Create(ctx, eventKey(n.cluster, nt.Key), b); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
			return err
		}
		n.log.Info().Str("key", nt.Key).Str("trigger", string(nt.Trigger)).Msg("notify: found")
	}
	return putJSON(ctx, n.kv, pollKey(n.cluster), next)
}

// read lists the leases bucket's executor and planner members and
// partition leases, and reads the cluster document.
func (p poller) read(ctx context.Context) (leaseState, error) {
	n := p.n
	cur := leaseState{executors: map[string][]int{}, now: n.now()}
	lkv, err := n.js.KeyValue(ctx, lease.Bucket)
	if err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
		return cur, err
	}
	var lst jetstream.Stream
	if lkv != nil {
		if lst, err = n.js.Stream(ctx, "KV_"+lease.Bucket); err != nil {
			return cur, err
		}
		keys, err := listKeys(ctx, lkv, ">")
		if err != nil {
			return cur, err
		}
		eg, pg := journal.ExecutorGroup(n.cluster), planloop.LeaseGroup(n.cluster)
		for _, k := range keys {
			switch {
			case strings.HasPrefix(k, eg+".m."):
				if m := strings.TrimPrefix(k, eg+".m."); cur.executors[m] == nil {
					cur.executors[m] = []int{}
				}
			case strings.HasPrefix(k, pg+".m."):
				cur.planners++
			}
		}
		for _, k := range keys {
			ps, ok := strings.CutPrefix(k, eg+".p.")
			if !ok {
				continue
			}
			part, err := strconv.Atoi(ps)
			if err != nil {
				continue
			}
			e, err := lkv.Get(ctx, k)
			if errors.Is(err, jetstream.ErrKeyNotFound) {
				continue
			}
			if err != nil {
				return cur, err
			}
			if owner := string(e.Value()); cur.executors[owner] != nil {
				cur.executors[owner] = append(cur.executors[owner], part)
			}
		}
	}
	cur.leases = lst
	if lst != nil {
		cur.ttl = lst.CachedInfo().Config.MaxAge
	}
	e, err := n.views.Get(ctx, views.ClusterKey(n.cluster))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil:
		return cur, err
	default:
		var doc views.ClusterDoc
		if err := jsonv1.Unmarshal(e.Value(), &doc); err != nil {
			return cur, fmt.Errorf("cluster document: %w", err)
		}
		cur.cluster = &doc
	}
	return cur, nil
}

// leftGracefully finds which of the members gone since prev left with a
// delete marker (a stopped executor) rather than expired (killed, or cut
// off): only an expiry is a loss. Lease keys expire by the bucket's TTL
// and leave nothing behind; delete markers age out with the same TTL.
func (p poller) leftGracefully(ctx context.Context, cur *leaseState, prev pollRecord) error {
	cur.left = map[string]bool{}
	eg := journal.ExecutorGroup(p.n.cluster)
	// A delete marker ages out with the bucket's TTL: over a gap longer
	// than it (the notifier was down, or polls too slowly), a member
	// gone without a marker may have left as well as expired. Not told
	// lost then, only logged.
	blind := !prev.At.IsZero() && cur.ttl > 0 && cur.now.Sub(prev.At) >= cur.ttl
	for m := range prev.Executors {
		if _, live := cur.executors[m]; live || cur.leases == nil {
			continue
		}
		if blind {
			p.n.log.Warn().Str("member", m).Stringer("since_last_poll", cur.now.Sub(prev.At)).Stringer("leases_ttl", cur.ttl).
				Msg("notify: executor gone while the notifier did not poll for longer than the leases' TTL: lost or left cannot be told; not notified")
			cur.left[m] = true
			continue
		}
		msg, err := cur.leases.GetLastMsgForSubject(ctx, "$KV."+lease.Bucket+"."+eg+".m."+m)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // expired: nothing left of it
		}
		if err != nil {
			return err
		}
		op := msg.Header.Get("KV-Operation")
		cur.left[m] = op == "DEL" || op == "PURGE"
	}
	return nil
}

func listKeys(ctx context.Context, kv jetstream.KeyValue, filter string) ([]string, error) {
	l, err := kv.ListKeysFiltered(ctx, filter)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = l.Stop() }()
	var out []string
	for k := range l.Keys() {
		out = append(out, k)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
