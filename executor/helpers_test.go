package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/executor"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/bus/bustest"
	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/internal/pvesim/pvesimtest"
)

const (
	cluster   = events.DefaultCluster
	node      = "pve1"
	simToken  = pvesimtest.TokenID
	simSecret = pvesimtest.TokenSecret
	consumer  = "executor-" + cluster
)

// env is one test's world: an embedded JetStream, a Proxmox simulator and a
// client for it.
type env struct {
	t   *testing.T
	b   *bus.Bus
	sim *pvesim.Sim
	px  *pve.Client
	url string // the simulator's API base URL
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvOn(t, bustest.New(t))
}

func newEnvOn(t *testing.T, b *bus.Bus) *env {
	t.Helper()
	sim := pvesimtest.Start(t, pvesim.Options{Seed: 1})
	return &env{t: t, b: b, sim: sim, px: pvesimtest.Client(t, sim), url: sim.URL()}
}

// newEnvBehind serves the simulator through a test server whose handler
// wraps the simulator's, e.g. to hold some requests back.
func newEnvBehind(t *testing.T, b *bus.Bus, wrap func(sim *pvesim.Sim) *httptest.Server) *env {
	t.Helper()
	sim := pvesimtest.New(t, pvesim.Options{Seed: 1})
	srv := wrap(sim)
	t.Cleanup(srv.Close)
	return &env{t: t, b: b, sim: sim, px: pvesimtest.ClientAt(t, srv.URL), url: srv.URL}
}

var tctx = pvesimtest.Context // a context bound to the test

func (v *env) addGuest(spec pvesim.GuestSpec) {
	v.t.Helper()
	if err := v.sim.AddGuest(spec); err != nil {
		v.t.Fatal(err)
	}
}

func (v *env) faults(fn func(*pvesim.Faults)) {
	v.t.Helper()
	if err := v.sim.UpdateFaults(fn); err != nil {
		v.t.Fatal(err)
	}
}

func (v *env) publish(kind events.Kind, vmid int, body any, hdr nats.Header) uint64 {
	v.t.Helper()
	data, ok := body.([]byte)
	if !ok {
		var err error
		if data, err = json.Marshal(body); err != nil {
			v.t.Fatal(err)
		}
	}
	ack, err := v.b.Publish(tctx(v.t), events.Subject(kind, cluster, vmid), data, hdr)
	if err != nil {
		v.t.Fatal(err)
	}
	return ack.Sequence
}

var actionN atomic.Int64

// action returns a planner-like action for a QEMU guest on node pve1.
func action(vmid int, op events.Op) events.Action {
	n := actionN.Add(1)
	return events.Action{
		Meta:    events.NewMeta("planner", fmt.Sprintf("corr-%d", n), time.Now()),
		ID:      fmt.Sprintf("act-%d-%d-%d", vmid, n, time.Now().UnixNano()),
		VMID:    vmid,
		Cluster: cluster,
		Node:    node,
		Kind:    events.QEMU,
		Op:      op,
		Reason:  "test",
	}
}

func (v *env) publishAction(a events.Action) uint64 {
	v.t.Helper()
	return v.publish(events.KindAction, a.VMID, a, nil)
}

type stored struct {
	Seq uint64
	events.Result
}

// results reads a guest's results from the stream, oldest first.
func (v *env) results(vmid int) []stored {
	v.t.Helper()
	ctx := tctx(v.t)
	s, err := v.b.Stream(ctx)
	if err != nil {
		v.t.Fatal(err)
	}
	var out []stored
	for seq := uint64(1); ; {
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(events.StoredFilter(events.KindResult, cluster, vmid)))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out
		}
		if err != nil {
			v.t.Fatal(err)
		}
		r, err := events.Decode[events.Result](m.Data)
		if err != nil {
			v.t.Fatal(err)
		}
		out = append(out, stored{Seq: m.Sequence, Result: r})
		seq = m.Sequence + 1
	}
}

// of filters results by action id.
func of(rs []stored, actionID string) []stored {
	var out []stored
	for _, r := range rs {
		if r.ActionID == actionID {
			out = append(out, r)
		}
	}
	return out
}

func finals(rs []stored) []stored {
	var out []stored
	for _, r := range rs {
		if r.Status.Final() {
			out = append(out, r)
		}
	}
	return out
}

// eventually polls cond (a bounded poll of observable state) until it holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitResult waits for a result of the action with the status (any final
// status if status is "final") and returns it.
func (v *env) waitResult(vmid int, actionID string, status events.ResultStatus) stored {
	v.t.Helper()
	var got stored
	eventually(v.t, fmt.Sprintf("%s result of %s", status, actionID), func() bool {
		for _, r := range of(v.results(vmid), actionID) {
			if r.Status == status || (status == "final" && r.Status.Final()) {
				got = r
				return true
			}
		}
		return false
	})
	return got
}

// tasks returns the simulator's tasks of a type for a guest.
func (v *env) tasks(vmid int, typ string) []pvesim.TaskInfo {
	var out []pvesim.TaskInfo
	for _, ti := range v.sim.Tasks() {
		if ti.ID == strconv.Itoa(vmid) && (typ == "" || ti.Type == typ) {
			out = append(out, ti)
		}
	}
	return out
}

// consumerInfo sums the partition consumers' counters; AckFloor.Stream is
// the highest of their ack floors.
func (v *env) consumerInfo() *jetstream.ConsumerInfo {
	v.t.Helper()
	ctx := tctx(v.t)
	s, err := v.b.Stream(ctx)
	if err != nil {
		v.t.Fatal(err)
	}
	sum := &jetstream.ConsumerInfo{}
	for p := range v.b.Config().Partitions {
		c, err := s.Consumer(ctx, fmt.Sprintf("%s-p%02d", consumer, p))
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			continue // not owned yet
		}
		if err != nil {
			v.t.Fatal(err)
		}
		info, err := c.Info(ctx)
		if err != nil {
			v.t.Fatal(err)
		}
		sum.NumAckPending += info.NumAckPending
		sum.NumRedelivered += info.NumRedelivered
		sum.NumPending += info.NumPending
		sum.AckFloor.Stream = max(sum.AckFloor.Stream, info.AckFloor.Stream)
	}
	return sum
}

// running is an Executor running in the background.
type running struct {
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

// stop cancels the executor and returns Run's error.
func (r *running) stop() error {
	r.once.Do(func() {
		r.cancel()
		r.err = <-r.done
	})
	return r.err
}

// run starts an executor over px (v.px if nil); cleanup stops it.
// config is the tests' Config: the defaults, named exec-test,
// redelivering after 2 s and abandoning in-flight actions at once (tests
// leave nothing in flight they care about); then mods.
func config(mods ...func(*executor.Config)) executor.Config {
	cfg := executor.DefaultConfig()
	cfg.Name, cfg.AckWait, cfg.DrainTimeout = "exec-test", 2*time.Second, 0
	for _, m := range mods {
		m(&cfg)
	}
	return cfg
}

func (v *env) run(cfg executor.Config, px executor.Proxmox) *running {
	v.t.Helper()
	if px == nil {
		px = v.px
	}
	cfg.Logger = zerolog.New(zerolog.NewTestWriter(v.t)).Level(zerolog.DebugLevel).With().Timestamp().Logger()
	ex, err := executor.New(executor.Unverified(cfg), px, v.b, v.b.LeaseStore)
	if err != nil {
		v.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- ex.Run(ctx) }()
	v.t.Cleanup(func() { _ = r.stop() })
	return r
}

// digest reads a guest's current config digest.
func (v *env) digest(ref pve.GuestRef) string {
	v.t.Helper()
	cfg, err := v.px.GuestConfig(tctx(v.t), ref)
	if err != nil {
		v.t.Fatal(err)
	}
	return cfg.Digest
}

func qemu(vmid int) pve.GuestRef { return pve.GuestRef{Kind: pve.KindQEMU, Node: node, VMID: vmid} }
