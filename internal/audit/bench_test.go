package audit_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/audit"
	"github.com/converge-pve/converge/internal/bus/bustest"
)

// benchJournal writes n events shaped like the pipeline's: per change a
// desired event, an observation, an action, a started and a final result
// with its read-back, over 10,000 guests, and a heartbeat every 50 events.
func benchJournal(b *testing.B, js jetstream.JetStream, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	written := 0
	pub := func(subject string, data []byte, h nats.Header) {
		if _, err := js.PublishMsgAsync(&nats.Msg{Subject: subject, Data: data, Header: h}); err != nil {
			b.Fatal(err)
		}
		written++
		if written%4096 == 0 {
			select {
			case <-js.PublishAsyncComplete():
			case <-ctx.Done():
				b.Fatal(ctx.Err())
			}
		}
	}
	for i := 0; written < n; i++ {
		vmid := 100 + i%10000
		h := nats.Header{}
		h.Set(events.HeaderPublisher, "bench")
		pub(events.Subject(events.KindDesired, "pve", vmid), fmt.Appendf(nil, `{"vmid":%d,"power":"running","cores":%d,"description":"change %d"}`, vmid, 1+i%4, i), h)
		o := events.Observed{Meta: events.NewMeta("observer@bench", "", t0), VMID: vmid, Cluster: "pve", Exists: true, Node: "pve1",
			Kind: events.QEMU, Status: "running", Digest: "0123456789abcdef0123456789abcdef01234567", ReadAt: t0.Add(time.Duration(i)),
			Config: events.GuestConfig{Name: "vm-" + strconv.Itoa(vmid), Tags: []string{"bench"}, Cores: 1, MemoryMiB: 2048}}
		pub(events.Subject(events.KindObserved, "pve", vmid), enc(o), nil)
		a := events.Action{Meta: events.NewMeta("planner@bench", "c", t0), ID: fmt.Sprintf("pve-%d-%d-1", vmid, i), VMID: vmid,
			Cluster: "pve", Node: "pve1", Kind: events.QEMU, Op: events.OpSetConfig, Set: map[string]string{"description": "x"},
			Reason: "config drift: description", DesiredSeq: uint64(i), BasisSeq: uint64(i)}
		pub(events.Subject(events.KindAction, "pve", vmid), enc(a), nil)
		r := events.Result{Meta: a.Meta, ActionID: a.ID, VMID: vmid, Cluster: "pve", Op: a.Op, Status: events.ResultStarted,
			UPID: "UPID:pve1:00001234:00001234:6B000000:qmconfig:101:root@pam!c:", Node: "pve1", Executor: "executor@bench"}
		pub(events.Subject(events.KindResult, "pve", vmid), enc(r), nil)
		o.ReadAt, o.Source = o.ReadAt.Add(time.Millisecond), events.SourceExecutor
		r.Status, r.Observed = events.ResultSucceeded, &o
		pub(events.Subject(events.KindResult, "pve", vmid), enc(r), nil)
		if i%10 == 0 {
			pub(events.ClusterSubject(events.KindHeartbeat, "pve"), enc(events.Heartbeat{Meta: events.NewMeta("observer@bench", "", t0),
				Cluster: "pve", Observer: "observer@bench", Reachable: true, Interval: 10 * time.Second}), nil)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		b.Fatal(ctx.Err())
	}
}

// BenchmarkReplayFoldUntil folds a whole journal with FoldUntil (the work
// of `converge replay`, less printing). CONVERGE_BENCH_EVENTS sets the
// journal's length (default 100,000); events/s is the figure to quote.
func BenchmarkReplayFoldUntil(b *testing.B) {
	n := 100_000
	if s := os.Getenv("CONVERGE_BENCH_EVENTS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	bb := bustest.New(b)
	benchJournal(b, bb.JS, n)
	ctx := context.Background()
	var folded uint64
	b.ResetTimer()
	for b.Loop() {
		p, err := audit.FoldUntil(ctx, bb.JS, "PVE", "pve", audit.Point{}, nil)
		if err != nil {
			b.Fatal(err)
		}
		folded += p.LastSeq
		if len(p.Views) != min(10000, n/5) {
			b.Fatalf("%d views", len(p.Views))
		}
	}
	b.ReportMetric(float64(folded)/b.Elapsed().Seconds(), "events/s")
}
