package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/executor"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/observer"
	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/planner"
	"github.com/converge-pve/converge/projector"
)

// Options size a run. Zero fields take the defaults of the targets.
type Options struct {
	Guests     int // default 10000
	Changes    int // default 100000
	Rate       int // changes/s of the latency run, default 1000
	LatencyN   int // changes in the latency run, default min(5 s × Rate, Guests)
	Partitions int // default 16
	Executors  int // default 1
	// Concurrency of each executor (default 256).
	Concurrency int
	// TaskLatency is how long each simulated Proxmox task runs (default 0):
	// with it, executors rather than the bus bound throughput, which is
	// how scale-out is measured.
	TaskLatency time.Duration
	// SimCommand, if set, runs the simulator in a process of its own: the
	// command of `converge sim` (e.g. the converge binary and "sim"), to
	// which the bench adds its flags. Otherwise it runs in the bench's
	// process, where its guests and its garbage add to converge's.
	SimCommand []string
	// Dir holds the journal; default a temp dir removed afterwards.
	Dir      string
	Progress func(phase string, done, total int)
	Logger   zerolog.Logger
}

func (o *Options) defaults() error {
	if o.Guests == 0 {
		o.Guests = 10000
	}
	if o.Changes == 0 {
		o.Changes = 100000
	}
	if o.Rate == 0 {
		o.Rate = 1000
	}
	if o.LatencyN == 0 {
		o.LatencyN = min(5*o.Rate, o.Guests)
	}
	if o.Partitions == 0 {
		o.Partitions = 16
	}
	if o.Executors == 0 {
		o.Executors = 1
	}
	if o.Concurrency == 0 {
		o.Concurrency = 256
	}
	switch {
	case o.Guests < 1 || o.Guests > 1000000:
		return fmt.Errorf("bench: guests must be within 1..1000000, got %d", o.Guests)
	case o.Changes < 1:
		return fmt.Errorf("bench: changes must be >= 1, got %d", o.Changes)
	case o.Rate < 1:
		return fmt.Errorf("bench: rate must be >= 1, got %d", o.Rate)
	case o.LatencyN < 1 || o.LatencyN > o.Guests:
		return fmt.Errorf("bench: latency changes must be within 1..guests (%d), got %d", o.Guests, o.LatencyN)
	case o.Executors < 1 || o.Executors > 64:
		return fmt.Errorf("bench: executors must be within 1..64, got %d", o.Executors)
	}
	if o.Progress == nil {
		o.Progress = func(string, int, int) {}
	}
	return nil
}

// Latency percentiles in milliseconds.
type Latency struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
}

// Report holds exactly the fields of DESIGN.md §9.
type Report struct {
	Guests                int     `json:"guests"`
	Changes               int     `json:"changes"`
	PipelineChangesPerS   float64 `json:"pipeline_changes_per_s"`
	RawPublishMsgsPerS    float64 `json:"raw_publish_msgs_per_s"`
	RawConsumeMsgsPerS    float64 `json:"raw_consume_msgs_per_s"`
	StreamWritesPerChange float64 `json:"stream_writes_per_change"`
	Efficiency            float64 `json:"efficiency"`
	LatencyMs             Latency `json:"latency_ms"`
	ReplayEventsPerS      float64 `json:"replay_events_per_s"`
	RawReplayMsgsPerS     float64 `json:"raw_replay_msgs_per_s"`
	PveCallsPerIdlePass   float64 `json:"pve_calls_per_idle_pass"`
}

// Details are figures the text report adds to the Report.
type Details struct {
	RawMessages     int
	RawMessageBytes int
	PipelineSeconds float64
	Actions         int
	StreamWrites    uint64
	LatencyChanges  int
	// The latency run split where the action was published: desired
	// accepted → action (planner), action → mutation (executor, Proxmox).
	LatencyPlanner, LatencyExecutor Latency
	// What one change of the latency run cost, from its first publish to
	// the convergence of its last change: the process's CPU time (every
	// role, the embedded server and the simulator), journal writes and
	// Proxmox calls. LatencySimCPUPerChange is the simulator's, when it
	// runs in its own process.
	LatencyCPUPerChange    time.Duration
	LatencySimCPUPerChange time.Duration
	LatencyWritesPerChange float64
	LatencyCallsPerChange  float64
	// Heap allocated per change during the latency run (every role, the
	// embedded server and an in-process simulator), and the garbage
	// collections that ran inside it: each one can stall a 2-core host for
	// a few hundred milliseconds, which is what p99 shows.
	LatencyAllocPerChange int64
	LatencyGCs            int
	ReplayEvents          int
	Elapsed               time.Duration
}

// Run performs a whole benchmark.
func Run(ctx context.Context, o Options) (*Report, *Details, error) {
	if err := o.defaults(); err != nil {
		return nil, nil, err
	}
	start := time.Now()
	// A simulator process that dies ends the run with its reason.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	dir := o.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "converge-bench-")
		if err != nil {
			return nil, nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	r := &run{o: o, log: o.Logger, fail: cancel, rep: &Report{Guests: o.Guests, Changes: o.Changes}, det: &Details{},
		converged: make([]uint64, o.Guests), target: make([]uint64, o.Guests), mutated: make([]int64, o.Guests)}
	if err := r.setup(ctx, dir); err != nil {
		return nil, nil, err
	}
	defer r.teardown()
	for _, phase := range []func(context.Context) error{r.raw, r.warm, r.pipeline, r.latency, r.idle, r.replay} {
		if err := phase(ctx); err != nil {
			return nil, nil, err
		}
	}
	r.rep.Efficiency = r.rep.PipelineChangesPerS * 3 / r.rep.RawPublishMsgsPerS
	r.det.Elapsed = time.Since(start)
	return r.rep, r.det, nil
}

type run struct {
	o   Options
	log zerolog.Logger
	rep *Report
	det *Details

	fail   context.CancelCauseFunc
	b      *bus.Bus
	sim    simulator
	stop   context.CancelFunc
	wg     sync.WaitGroup
	obs    *observer.Observer
	obsCtl context.CancelFunc

	// converged[i] is the newest desired revision guest 100+i converged at;
	// target[i] the revision it must reach. Written by the planner's
	// goroutine, read by the bench: atomics.
	converged []uint64
	target    []uint64
	// advancedAt is when a guest last converged at a newer revision (unix
	// ns): once every guest is at its target nothing advances, so it is
	// the moment the pipeline finished, whenever the bench polls.
	advancedAt atomic.Int64
	observed   atomic.Int64
	seen       sync.Map
	// mutated[i] is when the simulator received a mutation of 100+i during
	// the latency run (unix ns), 0 before.
	mutated    []int64
	latencyRun atomic.Bool
	execs      []*executor.Executor
	planner    *planner.Service
}

const tokenID, tokenSecret = "root@pam!bench", "bench-secret"

func (r *run) setup(ctx context.Context, dir string) error {
	srv, err := bus.StartEmbedded(bus.EmbeddedOptions{DataDir: dir, Name: "bench"})
	if err != nil {
		return err
	}
	b, err := bus.Connect(ctx, bus.Config{Server: srv, Name: "bench", Partitions: r.o.Partitions, Logger: r.log})
	if err != nil {
		srv.Shutdown()
		return err
	}
	if err := b.Provision(ctx); err != nil {
		return err
	}
	r.b = b
	if err := r.startSim(ctx); err != nil {
		return err
	}
	sim := r.sim
	px, err := pve.New(pve.Config{URL: sim.URL(), TokenID: tokenID, TokenSecret: tokenSecret, Logger: r.log})
	if err != nil {
		return err
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	// Roles stop before the server does: otherwise every consumer logs the
	// server's shutdown.
	r.stop = func() { cancel(); r.wg.Wait(); srv.Shutdown() }
	// Each role on its own connection, as `converge up` runs them.
	conn := func(name string) (*bus.Bus, error) { return b.Another(ctx, name) }
	ob, err := conn("bench-observer")
	if err != nil {
		return err
	}
	pb, err := conn("bench-planner")
	if err != nil {
		return err
	}
	r.obs, err = observer.New(observer.Config{Name: "bench-observer", ConfigRefresh: -1,
		ReadConcurrency: 16, Logger: r.log}, px, ob)
	if err != nil {
		return err
	}
	octx, ocancel := context.WithCancel(rctx)
	r.obsCtl = ocancel
	svc, err := planner.NewService(planner.ServiceConfig{Name: "bench-planner", Logger: r.log,
		Policy: planner.Policy{ObserverTimeout: time.Minute}, OnDecision: r.onDecision}, pb)
	if err != nil {
		return err
	}
	start := func(fn func(context.Context) error, c context.Context) {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			if err := fn(c); err != nil && !errors.Is(err, context.Canceled) {
				r.log.Error().Err(err).Msg("bench role stopped")
			}
		}()
	}
	r.planner = svc
	start(r.obs.Run, octx)
	start(svc.Run, rctx)
	for i := 0; i < r.o.Executors; i++ {
		eb, err := conn("bench-executor-" + strconv.Itoa(i))
		if err != nil {
			return err
		}
		ex, err := executor.New(executor.Config{Name: "bench-executor-" + strconv.Itoa(i), Concurrency: r.o.Concurrency,
			Logger: r.log}, px, eb)
		if err != nil {
			return err
		}
		start(ex.Run, rctx)
		r.execs = append(r.execs, ex)
	}
	// Measure the steady state: every executor holding its share of the
	// partitions (the first to start owns them all until the others join).
	return waitFor(ctx, 2*time.Minute, "executors sharing the partitions", func() (int, int, bool) {
		owned, balanced := 0, true
		for _, ex := range r.execs {
			n := len(ex.Partitions())
			owned += n
			balanced = balanced && n >= r.o.Partitions/len(r.execs)
		}
		return owned, r.o.Partitions, balanced && owned == r.o.Partitions
	})
}

// startSim starts the simulator with the bench's guests; the latency run
// takes its end times from the mutations it receives.
func (r *run) startSim(ctx context.Context) error {
	onMutation := func(vmid int, at int64) {
		if i := vmid - 100; r.latencyRun.Load() && i >= 0 && i < len(r.mutated) {
			atomic.CompareAndSwapInt64(&r.mutated[i], 0, at)
		}
	}
	if len(r.o.SimCommand) > 0 {
		s, err := startExternal(ctx, r.o.SimCommand, r.o, r.log, onMutation, r.fail)
		if err != nil {
			return err
		}
		r.sim = s
		return nil
	}
	sim, err := pvesim.New(pvesim.Options{Nodes: 3, Guests: r.o.Guests, Tokens: map[string]string{tokenID: tokenSecret},
		Faults:     pvesim.Faults{TaskLatency: pvesim.Duration(r.o.TaskLatency)},
		OnMutation: func(m pvesim.Mutation) { onMutation(m.VMID, m.At.UnixNano()) }})
	if err != nil {
		return err
	}
	if err := sim.Start("127.0.0.1:0"); err != nil {
		return err
	}
	r.sim = inProcess{sim}
	return nil
}

func (r *run) teardown() {
	if r.stop != nil {
		r.stop()
	}
	r.wg.Wait()
	if r.sim != nil {
		_ = r.sim.Close()
	}
}

func (r *run) onDecision(v *projector.View, d planner.Decision) {
	i := v.VMID - 100
	if i < 0 || i >= len(r.converged) {
		return
	}
	if v.Observed != nil {
		if _, loaded := r.seen.LoadOrStore(v.VMID, true); !loaded {
			r.observed.Add(1)
		}
	}
	if d.Status.Kind == planner.Converged && v.DesiredSeq > atomic.LoadUint64(&r.converged[i]) {
		atomic.StoreUint64(&r.converged[i], v.DesiredSeq)
		r.advancedAt.Store(time.Now().UnixNano())
	}
}

// waitFor polls a condition of the running pipeline, reporting progress.
func waitFor(ctx context.Context, limit time.Duration, what string, progress func() (int, int, bool)) error {
	return waitForEvery(ctx, 10*time.Millisecond, limit, what, progress)
}

// waitForEvery is waitFor polling every interval.
func waitForEvery(ctx context.Context, interval, limit time.Duration, what string, progress func() (int, int, bool)) error {
	deadline := time.Now().Add(limit)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, _, ok := progress(); ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-t.C:
		}
		if time.Now().After(deadline) {
			done, total, _ := progress()
			return fmt.Errorf("bench: %s did not finish within %s (%d of %d)", what, limit, done, total)
		}
	}
}

// sampleSize is the size of the events the pipeline writes per change.
func sampleSize() int {
	now := time.Now()
	d, _ := json.Marshal(map[string]any{"vmid": 4242, "description": "bench change 99999"})
	a, _ := json.Marshal(events.Action{Meta: events.NewMeta("bench-planner", "desired-pve-4242-123456", now), ID: "pve-4242-123456-1",
		VMID: 4242, Cluster: "pve", Node: "pve1", Kind: events.QEMU, Op: events.OpSetConfig,
		Set: map[string]string{"description": "bench change 99999"}, Digest: "0123456789abcdef0123456789abcdef01234567",
		Reason: "config drift: description", DesiredSeq: 123456, BasisSeq: 123400, Attempt: 1})
	o := &events.Observed{Meta: events.NewMeta("bench-executor", "", now), VMID: 4242, Cluster: "pve", Exists: true, Node: "pve1",
		Kind: events.QEMU, Status: "running", Digest: "0123456789abcdef0123456789abcdef01234567",
		Config: events.GuestConfig{Name: "vm-4242", Description: "bench change 99999", Tags: []string{"demo"}, Cores: 1, MemoryMiB: 512},
		ReadAt: now, Source: events.SourceExecutor}
	res, _ := json.Marshal(events.Result{Meta: events.NewMeta("bench-executor", "desired-pve-4242-123456", now),
		ActionID: "pve-4242-123456-1", VMID: 4242, Cluster: "pve", Op: events.OpSetConfig, Status: events.ResultSucceeded,
		Observed: o, Executor: "bench-executor"})
	return (len(d) + len(a) + len(res)) / 3
}

func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// publishAsync publishes without waiting, and waits when the window of
// unacknowledged publishes is full and the server has not drained it within
// the client's stall wait: back-pressure, not a failure (the raw run and
// the pipeline meet it the same way).
func publishAsync(ctx context.Context, js jetstream.JetStream, subject string, data []byte) (jetstream.PubAckFuture, error) {
	for {
		f, err := js.PublishAsync(subject, data)
		if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			return f, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// raw measures the bus alone with the pipeline's message count and size.
func (r *run) raw(ctx context.Context) error {
	n, size := r.o.Changes*3, sampleSize()
	r.det.RawMessages, r.det.RawMessageBytes = n, size
	js := r.b.JS
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "BENCHRAW", Subjects: []string{"benchraw.>"},
		Storage: jetstream.FileStorage, Retention: jetstream.LimitsPolicy})
	if err != nil {
		return err
	}
	defer func() { _ = js.DeleteStream(context.WithoutCancel(ctx), "BENCHRAW") }()
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = 'a' + byte(i%26)
	}
	settle()
	t0 := time.Now()
	for i := 0; i < n; i++ {
		if _, err := publishAsync(ctx, js, "benchraw."+strconv.Itoa(100+i%r.o.Guests), payload); err != nil {
			return err
		}
		if i%10000 == 0 {
			r.o.Progress("raw publish", i, n)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		return ctx.Err()
	}
	r.rep.RawPublishMsgsPerS = rate(n, time.Since(t0))

	cons, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "benchraw", AckPolicy: jetstream.AckExplicitPolicy,
		MaxAckPending: 10000})
	if err != nil {
		return err
	}
	got := make(chan struct{})
	var cnt atomic.Int64
	settle()
	t0 = time.Now()
	cc, err := cons.Consume(func(m jetstream.Msg) {
		_ = m.Ack()
		if c := cnt.Add(1); c == int64(n) {
			close(got)
		} else if c%10000 == 0 {
			r.o.Progress("raw consume", int(c), n)
		}
	}, jetstream.PullMaxMessages(1000), jetstream.PullHeartbeat(bus.ConsumeHeartbeat), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		r.log.Warn().Err(err).Msg("raw consume")
	}))
	if err != nil {
		return err
	}
	<-got
	r.rep.RawConsumeMsgsPerS = rate(n, time.Since(t0))
	cc.Stop()

	settle()
	t0 = time.Now()
	cnt.Store(0)
	got = make(chan struct{})
	oc, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return err
	}
	cc, err = oc.Consume(func(m jetstream.Msg) {
		if c := cnt.Add(1); c == int64(n) {
			close(got)
		}
	}, jetstream.PullMaxMessages(1000), jetstream.PullHeartbeat(bus.ConsumeHeartbeat))
	if err != nil {
		return err
	}
	<-got
	r.rep.RawReplayMsgsPerS = rate(n, time.Since(t0))
	cc.Stop()
	return nil
}

// warm waits until the planner has observed every guest.
func (r *run) warm(ctx context.Context) error {
	return waitFor(ctx, 5*time.Minute, "first observation of every guest", func() (int, int, bool) {
		n := int(r.observed.Load())
		r.o.Progress("observing guests", n, r.o.Guests)
		return n, r.o.Guests, n >= r.o.Guests
	})
}

func desiredBody(vmid int, desc string) []byte {
	return []byte(`{"vmid":` + strconv.Itoa(vmid) + `,"description":"` + desc + `"}`)
}

func (r *run) lastSeq(ctx context.Context) (uint64, error) {
	s, err := r.b.Stream(ctx)
	if err != nil {
		return 0, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.LastSeq, nil
}

// pipeline publishes every change at once and times full convergence.
func (r *run) pipeline(ctx context.Context) error {
	before, err := r.lastSeq(ctx)
	if err != nil {
		return err
	}
	actionsBefore := r.countActions()
	js := r.b.JS
	futures := make([]jetstream.PubAckFuture, r.o.Changes)
	settle()
	t0 := time.Now()
	for i := 0; i < r.o.Changes; i++ {
		vmid := 100 + i%r.o.Guests
		f, err := publishAsync(ctx, js, events.Subject(events.KindDesired, events.DefaultCluster, vmid), desiredBody(vmid, "bench change "+strconv.Itoa(i)))
		if err != nil {
			return err
		}
		futures[i] = f
		if i%5000 == 0 {
			r.o.Progress("publishing changes", i, r.o.Changes)
		}
	}
	for i, f := range futures {
		select {
		case ack := <-f.Ok():
			atomic.StoreUint64(&r.target[i%r.o.Guests], max(atomic.LoadUint64(&r.target[i%r.o.Guests]), ack.Sequence))
		case err := <-f.Err():
			return fmt.Errorf("bench: publish change %d: %w", i, err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// The targets are final now and a guest's revision only grows: a guest
	// found converged stays so, and each poll checks only the others. The
	// polls are slow and cheap (scanning every guest every 10 ms took 4 %
	// of the CPU the pipeline is measured on); the end is advancedAt.
	touched := min(r.o.Changes, r.o.Guests)
	waiting := make([]int, touched)
	for i := range waiting {
		waiting[i] = i
	}
	err = waitForEvery(ctx, 50*time.Millisecond, 30*time.Minute, "pipeline convergence", func() (int, int, bool) {
		left := waiting[:0]
		for _, i := range waiting {
			if atomic.LoadUint64(&r.converged[i]) < atomic.LoadUint64(&r.target[i]) {
				left = append(left, i)
			}
		}
		waiting = left
		n := touched - len(waiting)
		r.o.Progress("converging", n, touched)
		return n, touched, n == touched
	})
	if err != nil {
		return err
	}
	elapsed := time.Unix(0, r.advancedAt.Load()).Sub(t0)
	if elapsed <= 0 { // nothing advanced: every guest was there already
		elapsed = time.Since(t0)
	}
	after, err := r.lastSeq(ctx)
	if err != nil {
		return err
	}
	r.det.PipelineSeconds = elapsed.Seconds()
	r.det.StreamWrites = after - before
	r.det.Actions = r.countActions() - actionsBefore
	r.rep.PipelineChangesPerS = rate(r.o.Changes, elapsed)
	r.rep.StreamWritesPerChange = float64(after-before) / float64(r.o.Changes)
	return nil
}

func (r *run) countActions() int {
	s, err := r.b.Stream(context.Background())
	if err != nil {
		return 0
	}
	info, err := s.Info(context.Background(), jetstream.WithSubjectFilter("pve.action.>"))
	if err != nil {
		return 0
	}
	n := 0
	for _, c := range info.State.Subjects {
		n += int(c)
	}
	return n
}

// latency publishes changes at a fixed rate, each to a different guest,
// and measures desired accepted → mutation received by the simulator.
func (r *run) latency(ctx context.Context) error {
	// A settled system: the throughput run's last view documents written.
	err := waitFor(ctx, 5*time.Minute, "views written", func() (int, int, bool) {
		n := r.planner.ViewsBehind()
		return n, 0, n == 0
	})
	if err != nil {
		return err
	}
	n := r.o.LatencyN
	r.det.LatencyChanges = n
	accepted := make([]int64, n)
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
	gc0, alloc0 := gcCounters()
	cpu0, simCPU0 := processCPU(), r.sim.CPU()
	interval := time.Second / time.Duration(r.o.Rate)
	t0 := time.Now()
	for i := 0; i < n; i++ {
		if d := time.Until(t0.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d) // pacing the offered load, not synchronising
		}
		vmid := 100 + i
		ack, err := r.b.Publish(ctx, events.Subject(events.KindDesired, events.DefaultCluster, vmid), desiredBody(vmid, "latency "+strconv.Itoa(i)), nil)
		if err != nil {
			return err
		}
		accepted[i] = time.Now().UnixNano()
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
		total = append(total, m-accepted[i])
		// An action the subscription missed (a slow consumer) splits nothing.
		if p := atomic.LoadInt64(&planned[i]); p != 0 {
			toAction, toMutation = append(toAction, p-accepted[i]), append(toMutation, m-p)
		}
	}
	r.rep.LatencyMs = percentiles(total)
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
// (docs/benchmarks.md).
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

// idle measures Proxmox calls of observer passes with nothing changed.
func (r *run) idle(ctx context.Context) error {
	r.obsCtl() // the benchmark drives passes itself from here on
	if _, err := r.obs.Pass(ctx); err != nil {
		return err
	}
	const passes = 3
	before, err := r.sim.Calls(ctx)
	if err != nil {
		return err
	}
	for i := 0; i < passes; i++ {
		if _, err := r.obs.Pass(ctx); err != nil {
			return err
		}
	}
	after, err := r.sim.Calls(ctx)
	if err != nil {
		return err
	}
	r.rep.PveCallsPerIdlePass = float64(after-before) / passes
	return nil
}

// replay folds the whole journal into fresh projections.
func (r *run) replay(ctx context.Context) error {
	s, err := r.b.Stream(ctx)
	if err != nil {
		return err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return err
	}
	total := int(info.State.Msgs)
	p := projector.New(events.DefaultCluster)
	oc, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return err
	}
	// As the planner catches up: batches decoded in parallel, folded in order.
	var cnt int
	done := make(chan struct{})
	batch := make([]projector.Event, 0, 1024)
	settle()
	apply := func() {
		projector.Predecode(batch, runtime.GOMAXPROCS(0))
		for _, ev := range batch {
			p.Apply(ev)
		}
		cnt += len(batch)
		batch = batch[:0]
	}
	t0 := time.Now()
	cc, err := oc.Consume(func(m jetstream.Msg) {
		md, err := m.Metadata()
		if err != nil {
			return
		}
		batch = append(batch, projector.Event{Seq: md.Sequence.Stream, Subject: m.Subject(), Header: m.Headers(), Data: m.Data(), Time: md.Timestamp})
		last := md.Sequence.Stream >= info.State.LastSeq
		if len(batch) == cap(batch) || last {
			apply()
			r.o.Progress("replaying", cnt, total)
		}
		if last {
			close(done)
		}
	}, jetstream.PullMaxMessages(1000), jetstream.PullHeartbeat(bus.ConsumeHeartbeat))
	if err != nil {
		return err
	}
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	cc.Stop()
	r.det.ReplayEvents = cnt
	r.rep.ReplayEventsPerS = rate(cnt, time.Since(t0))
	return nil
}
