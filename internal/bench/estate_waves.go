package bench

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/converge-pve/converge/internal/pve"
)

// taskTimes records, on converge's side of the Proxmox client, when each
// start was sent and when its task's end was seen, per node: where a
// node's power-task slot stood empty between one task's end and the next
// start is what the makespan pays above the ideal (EstateWaves).
type taskTimes struct {
	mu       sync.Mutex
	on       bool
	sent     map[string][]int64 // node → start POSTs' send times
	returned map[string]int64   // UPID → when its POST answered
	ended    map[string][]int64 // node → when a start task's end was seen
	endLag   []int64            // end seen − (POST answered + power task)
	perGuest map[int]int        // vmid → starts sent
	power    time.Duration
	t0       int64 // when armed
}

func newTaskTimes(power time.Duration) *taskTimes {
	return &taskTimes{sent: map[string][]int64{}, returned: map[string]int64{}, ended: map[string][]int64{}, perGuest: map[int]int{}, power: power}
}

func (t *taskTimes) arm(on bool) {
	t.mu.Lock()
	t.on = on
	if on {
		t.t0 = time.Now().UnixNano()
	}
	t.mu.Unlock()
}

func (t *taskTimes) started(g pve.GuestRef, sent int64, ref pve.TaskRef, err error) {
	now := time.Now().UnixNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.on || err != nil {
		return
	}
	t.sent[g.Node] = append(t.sent[g.Node], sent)
	t.returned[ref.UPID] = now
	t.perGuest[g.VMID]++
}

func (t *taskTimes) waited(ref pve.TaskRef) {
	now := time.Now().UnixNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.returned[ref.UPID]
	if !t.on || !ok {
		return
	}
	delete(t.returned, ref.UPID)
	t.ended[ref.Node] = append(t.ended[ref.Node], now)
	t.endLag = append(t.endLag, now-at-int64(t.power))
}

// EstateWaves: SlotGapMs is, for every start after a node's first nc, the
// time from the end seen that freed its slot (the nc-th end before it, in
// order) to its POST; EndSeenLagMs how long after a task's expected end
// (its POST's answer + the power task) converge saw it end.
type EstateWaves struct {
	SlotGapMs    Latency `json:"slot_gap_ms"`
	EndSeenLagMs Latency `json:"end_seen_lag_ms"`
	// FirstStartS and LastEndS: over the nodes, when each node's first
	// start was sent and its last start's end seen, seconds from the
	// change's publish.
	FirstStartS Latency `json:"first_start_s"`
	LastEndS    Latency `json:"last_end_s"`
	// Starts: how many starts the nodes were sent, over the nodes;
	// StartedTwice the guests sent more than one (each guest needs one).
	Starts       Latency `json:"starts"`
	StartedTwice []int   `json:"started_twice,omitempty"`
}

func (t *taskTimes) waves(nc int) EstateWaves {
	t.mu.Lock()
	defer t.mu.Unlock()
	var gaps, first, last, starts []int64
	for node, sent := range t.sent {
		s, e := slices.Sorted(slices.Values(sent)), slices.Sorted(slices.Values(t.ended[node]))
		first, starts = append(first, (s[0]-t.t0)/1000), append(starts, int64(len(s))*1e6)
		if len(e) > 0 {
			last = append(last, (e[len(e)-1]-t.t0)/1000)
		}
		for i := nc; nc > 0 && i < len(s) && i-nc < len(e); i++ {
			gaps = append(gaps, s[i]-e[i-nc])
		}
	}
	var twice []int
	for vmid, n := range t.perGuest {
		if n > 1 {
			twice = append(twice, vmid)
		}
	}
	slices.Sort(twice)
	// percentiles reads nanoseconds as milliseconds: seconds and counts
	// are scaled to come out as themselves.
	return EstateWaves{SlotGapMs: percentiles(gaps), EndSeenLagMs: percentiles(t.endLag),
		FirstStartS: percentiles(first), LastEndS: percentiles(last), Starts: percentiles(starts), StartedTwice: twice}
}

// Start is pve.Client.Start, timed.
func (c *readCounter) Start(ctx context.Context, ref pve.GuestRef) (pve.TaskRef, error) {
	sent := time.Now().UnixNano()
	tr, err := c.Client.Start(ctx, ref)
	c.tasks.started(ref, sent, tr, err)
	return tr, err
}

// WaitTask is pve.Client.WaitTask, its end timed.
func (c *readCounter) WaitTask(ctx context.Context, ref pve.TaskRef, opts pve.WaitOptions) (pve.TaskResult, error) {
	res, err := c.Client.WaitTask(ctx, ref, opts)
	if err == nil {
		c.tasks.waited(ref)
	}
	return res, err
}
