package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/converge-pve/converge/events"
)

// latency publishes changes at a fixed rate, each to a different guest,
// and measures desired sent (its publish) → mutation received by the simulator; then
// again at each larger estate of Options.LatencyAt, the simulator grown to
// it (Report.LatencyMsByGuests).
func (r *run) latency(ctx context.Context) error {
	if err := r.latencyAt(ctx, "latency ", "latency-"+strconv.Itoa(r.o.Guests)); err != nil {
		return err
	}
	r.rep.LatencyMsByGuests = map[string]Latency{strconv.Itoa(r.o.Guests): r.rep.LatencyMs}
	main, det := r.rep.LatencyMs, *r.det
	for _, n := range r.o.LatencyAt {
		if err := r.grow(ctx, n); err != nil {
			return err
		}
		if err := r.latencyAt(ctx, "latency at "+strconv.Itoa(n)+" guests ", "latency-"+strconv.Itoa(n)); err != nil {
			return err
		}
		r.rep.LatencyMsByGuests[strconv.Itoa(n)] = r.rep.LatencyMs
	}
	// The report's own figures stay those at Options.Guests.
	r.rep.LatencyMs, *r.det = main, det
	return nil
}

// grow adds demo guests up to n and waits until the planner has observed
// every one.
func (r *run) grow(ctx context.Context, n int) error {
	g, ok := r.sim.(inProcess)
	if !ok {
		return fmt.Errorf("bench: --latency-at needs the simulator in-process")
	}
	have := r.o.Guests
	for _, m := range r.o.LatencyAt {
		if m < n {
			have = max(have, m)
		}
	}
	g.GrowDemo(have, n)
	return waitFor(ctx, 10*time.Minute, "first observation of the grown estate", func() (int, int, bool) {
		c := int(r.observed.Load())
		r.o.Progress("observing guests", c, n)
		return c, n, c >= n
	})
}

func (r *run) latencyAt(ctx context.Context, label, phase string) (err error) {
	// A settled system: the throughput run's last view documents written.
	err = waitFor(ctx, 5*time.Minute, "views written", func() (int, int, bool) {
		n := r.app.Planner().ViewsBehind()
		return n, 0, n == 0
	})
	if err != nil {
		return err
	}
	n := r.o.LatencyN
	r.det.LatencyChanges = n
	sent := make([]int64, n)
	for i := range r.mutated {
		atomic.StoreInt64(&r.mutated[i], 0)
	}
	// When each change's action was published, seen on core NATS: splits
	// the latency between the planner and the executor.
	planned := make([]int64, n)
	sub, err := r.b.NC.Subscribe(events.ClusterSubject(events.KindAction, events.DefaultCluster)+".*", func(m *nats.Msg) {
		at := time.Now().UnixNano()
		if i, err := strconv.Atoi(m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]); err == nil && i >= 100 && i-100 < n {
			atomic.CompareAndSwapInt64(&planned[i-100], 0, at)
		}
	})
	if err != nil {
		return err
	}
	defer func() { _ = sub.Unsubscribe() }()
	r.latencyRun.Store(true)
	defer r.latencyRun.Store(false)
	seq0, err := r.lastSeq(ctx)
	if err != nil {
		return err
	}
	calls0, err := r.sim.Calls(ctx)
	if err != nil {
		return err
	}
	settle()
	prof, err := r.startPhase(phase)
	if err != nil {
		return err
	}
	defer func() {
		if perr := prof.stop(); err == nil {
			err = perr
		}
	}()
	gc0, alloc0 := gcCounters()
	cpu0, simCPU0 := processCPU(), r.sim.CPU()
	interval := time.Second / time.Duration(r.o.Rate)
	t0 := time.Now()
	for i := 0; i < n; i++ {
		if d := time.Until(t0.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d) // pacing the offered load, not synchronising
		}
		vmid := 100 + i
		// From when the change is sent: the pipeline may reach Proxmox
		// before the publisher has read the journal's acknowledgement
		// (measured from that, a latency came out negative).
		sent[i] = time.Now().UnixNano()
		ack, err := r.b.Publish(ctx, events.Subject(events.KindDesired, events.DefaultCluster, vmid), desiredBody(vmid, label+strconv.Itoa(i)), nil)
		if err != nil {
			return err
		}
		atomic.StoreUint64(&r.target[i], ack.Sequence)
		if i%500 == 0 {
			r.o.Progress("latency run", i, n)
		}
	}
	err = waitFor(ctx, 10*time.Minute, "latency-run mutations", func() (int, int, bool) {
		c := 0
		for i := 0; i < n; i++ {
			if atomic.LoadInt64(&r.mutated[i]) != 0 {
				c++
			}
		}
		return c, n, c == n
	})
	if err != nil {
		return err
	}
	total, toAction, toMutation := make([]int64, 0, n), make([]int64, 0, n), make([]int64, 0, n)
	for i := 0; i < n; i++ {
		m := atomic.LoadInt64(&r.mutated[i])
		total = append(total, m-sent[i])
		// An action the subscription missed (a slow consumer) splits nothing.
		if p := atomic.LoadInt64(&planned[i]); p != 0 {
			toAction, toMutation = append(toAction, p-sent[i]), append(toMutation, m-p)
		}
	}
	r.rep.LatencyMs = percentiles(total)
	if err := r.latencyTrace(phase, sent, total, planned); err != nil {
		return err
	}
	r.det.LatencyPlanner, r.det.LatencyExecutor = percentiles(toAction), percentiles(toMutation)
	// Let the latency run's actions finish before the idle pass.
	err = waitFor(ctx, 10*time.Minute, "latency-run convergence", func() (int, int, bool) {
		c := 0
		for i := 0; i < n; i++ {
			if atomic.LoadUint64(&r.converged[i]) >= atomic.LoadUint64(&r.target[i]) {
				c++
			}
		}
		return c, n, c == n
	})
	if err != nil {
		return err
	}
	seq1, err := r.lastSeq(ctx)
	if err != nil {
		return err
	}
	r.det.LatencyCPUPerChange = (processCPU() - cpu0) / time.Duration(n)
	gc1, alloc1 := gcCounters()
	r.det.LatencyGCs, r.det.LatencyAllocPerChange = int(gc1-gc0), int64(alloc1-alloc0)/int64(n)
	r.det.LatencySimCPUPerChange = (r.sim.CPU() - simCPU0) / time.Duration(n)
	calls1, err := r.sim.Calls(ctx)
	if err != nil {
		return err
	}
	r.det.LatencyWritesPerChange = float64(seq1-seq0) / float64(n)
	r.det.LatencyCallsPerChange = float64(calls1-calls0) / float64(n)
	return nil
}

// settle collects the garbage earlier phases left before a phase is timed,
// as testing.B does before each benchmark, so that a phase pays for its own
// garbage and not its predecessor's. What a phase allocates itself is
// collected when the runtime decides, inside the measurement (the latency
// run reports how many collections fell in it). The freed memory is left to
// the runtime's scavenger: returning it all first (debug.FreeOSMemory)
// cost more in page faults during the run than the scavenger does
// (docs/benchmarks-history.md).
func settle() { runtime.GC() }

// gcCounters reads the completed garbage collections and the bytes
// allocated so far, without stopping the world as ReadMemStats does.
func gcCounters() (cycles, allocBytes uint64) {
	m := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(m)
	return m[0].Value.Uint64(), m[1].Value.Uint64()
}

// processCPU is the CPU time (user and system) the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// percentiles of durations in nanoseconds, in milliseconds; zero for none.
func percentiles(ns []int64) Latency {
	n := len(ns)
	if n == 0 {
		return Latency{}
	}
	lat := make([]float64, n)
	for i, d := range ns {
		lat[i] = max(0, float64(d)/1e6)
	}
	sort.Float64s(lat)
	pct := func(p float64) float64 { return lat[min(n-1, int(p*float64(n)))] }
	return Latency{P50: pct(0.50), P90: pct(0.90), P99: pct(0.99)}
}

// latencyTrace writes a latency run's changes into Options.PhaseProfiles
// (<phase>.latency.tsv), one a line: its index, when it was sent (Unix
// nanoseconds), its latency and the planner's part of it (nanoseconds, 0
// when the action was not seen). Set beside the collector's trace
// (GODEBUG=gctrace=1), it shows when the slow changes came
// (docs/benchmarks.md).
func (r *run) latencyTrace(phase string, sent, total, planned []int64) error {
	if r.o.PhaseProfiles == "" {
		return nil
	}
	var b strings.Builder
	b.WriteString("change\tsent_unix_ns\tlatency_ns\tplanner_ns\n")
	for i := range sent {
		var p int64
		if at := atomic.LoadInt64(&planned[i]); at != 0 {
			p = at - sent[i]
		}
		fmt.Fprintf(&b, "%d\t%d\t%d\t%d\n", i, sent[i], total[i], p)
	}
	return os.WriteFile(filepath.Join(r.o.PhaseProfiles, phase+".latency.tsv"), []byte(b.String()), 0o644)
}
