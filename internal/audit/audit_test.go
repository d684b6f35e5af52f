package audit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/audit"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/bus/bustest"
	"github.com/converge-pve/converge/projector"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func enc(v any) []byte {
	b, err := events.Encode(v)
	if err != nil {
		panic(err)
	}
	return b
}

// writer publishes events to a test journal and remembers what it wrote,
// as the stream stored it, for folding with a projector directly.
type writer struct {
	t   testing.TB
	b   *bus.Bus
	s   jetstream.Stream
	evs []projector.Event
}

func newWriter(t testing.TB) *writer {
	b := bustest.New(t)
	s, err := b.Stream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return &writer{t: t, b: b, s: s}
}

func (w *writer) pub(subject string, data []byte, h nats.Header) uint64 {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ack, err := w.b.Publish(ctx, subject, data, h)
	if err != nil {
		w.t.Fatal(err)
	}
	m, err := w.s.GetMsg(ctx, ack.Sequence)
	if err != nil {
		w.t.Fatal(err)
	}
	w.evs = append(w.evs, projector.Event{Seq: m.Sequence, Subject: m.Subject, Header: events.Header(m.Header), Data: m.Data, Time: m.Time})
	return ack.Sequence
}

func (w *writer) desired(vmid int, body, publisher, corr string) uint64 {
	h := nats.Header{}
	if publisher != "" {
		h.Set(events.HeaderPublisher, publisher)
	}
	if corr != "" {
		h.Set(events.HeaderCorrelationID, corr)
	}
	return w.pub(events.Subject(events.KindDesired, "pve", vmid), []byte(body), h)
}

func observed(vmid int, readAt time.Time, status string, cores int, digest string) *events.Observed {
	return &events.Observed{Meta: events.NewMeta("observer@test", "", readAt), VMID: vmid, Cluster: "pve", Exists: true, Node: "pve1",
		Kind: events.QEMU, Status: status, Digest: digest, ReadAt: readAt, Source: events.SourceObserver,
		Config: events.GuestConfig{Name: "web", Description: "hello", Tags: []string{"prod"}, Cores: cores, MemoryMiB: 2048}}
}

func (w *writer) observed(o *events.Observed) uint64 {
	return w.pub(events.Subject(events.KindObserved, o.Cluster, o.VMID), enc(o), nil)
}

const upid = "UPID:pve1:00001234:00005678:6B000000:qmconfig:101:root@pam!converge:"

// script writes a journal where guest 101 goes through a rejected and an
// accepted desired change, identical and changed polls, an action that
// fails and one that succeeds; guest 102, another cluster, heartbeats and
// a resync are interleaved.
func script(w *writer) (marks map[string]uint64) {
	marks = map[string]uint64{}
	hb := func(n int) {
		w.pub(events.ClusterSubject(events.KindHeartbeat, "pve"), enc(events.Heartbeat{Meta: events.NewMeta("observer@test", "", t0.Add(time.Duration(n)*time.Second)),
			Cluster: "pve", Observer: "observer@test", Reachable: true, Pass: uint64(n), Interval: 10 * time.Second}), nil)
	}
	hb(1)
	marks["obs1"] = w.observed(observed(101, t0.Add(time.Second), "running", 2, "d1"))
	w.observed(observed(102, t0.Add(time.Second), "stopped", 1, "x1"))
	w.observed(observed(101, t0.Add(2*time.Second), "running", 2, "d1")) // identical poll
	w.observed(observed(101, t0.Add(3*time.Second), "running", 2, "d2")) // digest only
	marks["rejected"] = w.desired(101, `{"vmid":101,"cores":0}`, "billing", "")
	marks["desiredA"] = w.desired(101, `{"vmid":101,"power":"running","cores":4}`, "billing", "corr-a")
	w.desired(102, `{"vmid":102,"power":"running"}`, "portal", "")
	w.pub(events.Subject(events.KindDesired, "lab", 101), []byte(`{"vmid":101,"cores":8}`), nil) // another cluster
	hb(2)
	a := events.Action{Meta: events.NewMeta("planner@test", "corr-a", t0), ID: fmt.Sprintf("pve-101-%d-1", marks["desiredA"]), VMID: 101,
		Cluster: "pve", Node: "pve1", Kind: events.QEMU, Op: events.OpSetConfig, Set: map[string]string{"cores": "4"},
		Reason: "config drift: cores", DesiredSeq: marks["desiredA"], BasisSeq: marks["obs1"], Attempt: 1}
	marks["action1"] = w.pub(events.Subject(events.KindAction, "pve", 101), enc(a), nil)
	res := func(id string, st events.ResultStatus) events.Result {
		return events.Result{Meta: events.NewMeta("executor@test", "corr-a", t0), ActionID: id, VMID: 101, Cluster: "pve",
			Op: events.OpSetConfig, Status: st, UPID: upid, Node: "pve1", Executor: "executor@test"}
	}
	w.pub(events.Subject(events.KindResult, "pve", 101), enc(res(a.ID, events.ResultStarted)), nil)
	failed := res(a.ID, events.ResultFailed)
	failed.Error, failed.ErrorClass, failed.TaskLog = "can't lock file '/var/lock/qemu-server/lock-101.conf' - got timeout", "transient",
		[]string{"TASK ERROR: can't lock file"}
	failed.Observed = observed(101, t0.Add(4*time.Second), "running", 2, "d3")
	marks["failed"] = w.pub(events.Subject(events.KindResult, "pve", 101), enc(failed), nil)
	w.pub(events.ClusterSubject(events.KindControl, "pve"), enc(events.Control{Meta: events.NewMeta("cli", "", t0), Command: events.CommandResync}), nil)
	a2 := a
	a2.ID, a2.Attempt = fmt.Sprintf("pve-101-%d-2", marks["desiredA"]), 2
	w.pub(events.Subject(events.KindAction, "pve", 101), enc(a2), nil)
	ok := res(a2.ID, events.ResultSucceeded)
	ok.Observed = observed(101, t0.Add(5*time.Second), "running", 4, "d4")
	marks["succeeded"] = w.pub(events.Subject(events.KindResult, "pve", 101), enc(ok), nil)
	marks["obs2"] = w.observed(observed(101, t0.Add(6*time.Second), "running", 4, "d4"))
	o := observed(101, t0.Add(7*time.Second), "stopped", 4, "d5")
	o.Lock = "backup"
	marks["obs3"] = w.observed(o)
	hb(3)
	marks["desiredB"] = w.desired(101, `{"vmid":101,"power":"stopped","cores":4}`, "", "")
	return marks
}

func TestHistoryTimeline(t *testing.T) {
	w := newWriter(t)
	marks := script(w)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Written after the history began: not part of it.
	es, err := audit.Timeline(ctx, w.b.JS, "PVE", "pve", 101, 0, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		seq  uint64
		kind events.Kind
		who  string
		corr string
		task string
	}
	var got []row
	for _, e := range es {
		got = append(got, row{e.Seq, e.Kind, e.Who, e.CorrelationID, e.TaskID})
		if e.VMID != 101 || e.Cluster != "pve" || e.Time.IsZero() || e.Summary == "" {
			t.Errorf("entry %d not self-contained: %+v", e.Seq, e)
		}
	}
	dA := marks["desiredA"]
	want := []row{
		{marks["obs1"], events.KindObserved, "observer@test", "", ""},
		{marks["rejected"], events.KindDesired, "billing", "", ""},
		{dA, events.KindDesired, "billing", "corr-a", ""},
		{marks["action1"], events.KindAction, "planner@test", "corr-a", ""},
		{marks["action1"] + 1, events.KindResult, "executor@test", "corr-a", upid},
		{marks["failed"], events.KindResult, "executor@test", "corr-a", upid},
		{marks["failed"] + 2, events.KindAction, "planner@test", "corr-a", ""},
		{marks["succeeded"], events.KindResult, "executor@test", "corr-a", upid},
		{marks["obs2"], events.KindObserved, "observer@test", "", ""},
		{marks["obs3"], events.KindObserved, "observer@test", "", ""},
		{marks["desiredB"], events.KindDesired, "unknown", fmt.Sprintf("desired-pve-101-%d", marks["desiredB"]), ""},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("timeline\n got %+v\nwant %+v", got, want)
	}
	byseq := map[uint64]audit.Entry{}
	for _, e := range es {
		byseq[e.Seq] = e
	}
	if e := byseq[marks["rejected"]]; e.Desired != nil || !strings.Contains(e.Rejected, "cores") || e.Body != `{"vmid":101,"cores":0}` {
		t.Errorf("rejected entry: %+v", e)
	}
	if e := byseq[dA]; e.Desired == nil || *e.Desired.Cores != 4 || e.Summary != "power=running cores=4" {
		t.Errorf("desired entry: %+v", e)
	}
	if e := byseq[marks["failed"]]; e.Result.Status != events.ResultFailed || e.Result.ErrorClass != "transient" ||
		len(e.Result.TaskLog) != 1 || e.Result.Observed != nil || !strings.Contains(e.Summary, "[transient]") {
		t.Errorf("failed entry: %+v %+v", e, e.Result)
	}
	if e := byseq[marks["failed"]+2]; e.Action.Attempt != 2 || !strings.Contains(e.Summary, "attempt 2") {
		t.Errorf("retry entry: %+v", e)
	}
	if e := byseq[marks["obs1"]]; len(e.Changes) != 0 || !strings.HasPrefix(e.Summary, "first seen: qemu on pve1, running, 2 cores") {
		t.Errorf("first observation: %+v", e)
	}
	if e := byseq[marks["obs2"]]; !reflect.DeepEqual(e.Changes, []string{"cores: 2 → 4"}) {
		t.Errorf("second observation changes: %q", e.Changes)
	}
	if e := byseq[marks["obs3"]]; !reflect.DeepEqual(e.Changes, []string{"status: running → stopped", "lock: none → backup"}) {
		t.Errorf("third observation changes: %q", e.Changes)
	}
	// Each entry stands alone as a JSON line.
	for _, e := range es {
		b, _ := json.Marshal(e)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"vmid", "cluster", "seq", "time", "kind", "who", "summary"} {
			if _, ok := m[k]; !ok {
				t.Errorf("entry %d: no %q in %s", e.Seq, k, b)
			}
		}
	}

	// --since: only what was stored from then on.
	since := byseq[marks["succeeded"]].Time
	es, err = audit.Timeline(ctx, w.b.JS, "PVE", "pve", 101, 16, since)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 4 || es[0].Seq != marks["succeeded"] || es[1].Seq != marks["obs2"] || es[1].Changes != nil {
		t.Fatalf("since %s: %+v", since, es)
	}
	// Issue 35: the window's first observation is not the guest's first.
	if want := "first since " + since.UTC().Format(time.RFC3339) + " (seen before): qemu on pve1, running, 4 cores"; !strings.HasPrefix(es[1].Summary, want) {
		t.Errorf("first observation since %s: %q, want %q…", since, es[1].Summary, want)
	}
	// A window that begins with the guest's first observation says so.
	es, err = audit.Timeline(ctx, w.b.JS, "PVE", "pve", 101, 16, byseq[marks["obs1"]].Time)
	if err != nil || len(es) == 0 || es[0].Seq != marks["obs1"] || !strings.HasPrefix(es[0].Summary, "first seen: ") {
		t.Fatalf("since the first observation: %v %+v", err, es)
	}
	es, err = audit.Timeline(ctx, w.b.JS, "PVE", "pve", 101, 16, time.Now().Add(time.Hour))
	if err != nil || len(es) != 0 {
		t.Fatalf("since the future: %v %+v", err, es)
	}
	// A guest with no events, and a guest of another cluster.
	for _, c := range []struct {
		cluster string
		vmid    int
		n       int
	}{{"pve", 999, 0}, {"lab", 101, 1}} {
		es, err = audit.Timeline(ctx, w.b.JS, "PVE", c.cluster, c.vmid, 0, time.Time{})
		if err != nil || len(es) != c.n {
			t.Fatalf("%s/%d: %v %+v", c.cluster, c.vmid, err, es)
		}
	}
}

// TestHistoryTimelineStopsAtItsStart: events appended while a history is read
// are not waited for, and the call returns even for a busy guest.
func TestHistoryTimelineStopsAtItsStart(t *testing.T) {
	w := newWriter(t)
	for i := range 50 {
		w.observed(observed(101, t0.Add(time.Duration(i)*time.Second), "running", 1+i, "d"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := w.b.Publish(ctx, events.Subject(events.KindObserved, "pve", 101), enc(observed(101, t0.Add(time.Hour), "running", 100+i, "e")), nil); err != nil {
				return
			}
		}
	}()
	es, err := audit.Timeline(ctx, w.b.JS, "PVE", "pve", 101, 0, time.Time{})
	close(stop)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	if len(es) < 50 || es[49].Observed.Config.Cores != 50 {
		t.Fatalf("got %d entries", len(es))
	}
}

func foldDirect(evs []projector.Event, until uint64) *projector.Projector {
	p := projector.New("pve")
	for _, ev := range evs {
		if ev.Seq <= until {
			p.Apply(ev)
		}
	}
	return p
}

func mustJSON(t testing.TB, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestReplayFoldUntil: folding the stream up to a point gives exactly the
// projector of the events up to it, for a sequence, a time, both, and the
// whole stream.
func TestReplayFoldUntil(t *testing.T) {
	w := newWriter(t)
	marks := script(w)
	// More than a batch, so that batching and parallel decoding are used.
	for i := range 3000 {
		w.observed(observed(200+i%300, t0.Add(time.Duration(i)*time.Millisecond), []string{"running", "stopped"}[i%2], 1+i%7, "z"))
	}
	lastSeq := w.evs[len(w.evs)-1].Seq
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	timeOf := func(seq uint64) time.Time {
		for _, ev := range w.evs {
			if ev.Seq == seq {
				return ev.Time
			}
		}
		t.Fatalf("no seq %d", seq)
		return time.Time{}
	}
	between := timeOf(marks["desiredA"]).Add(timeOf(marks["desiredA"]+1).Sub(timeOf(marks["desiredA"])) / 2)
	cases := []struct {
		name  string
		until audit.Point
		want  uint64
	}{
		{"whole stream", audit.Point{}, lastSeq},
		{"seq", audit.Point{Seq: marks["failed"]}, marks["failed"]},
		{"seq beyond the end", audit.Point{Seq: lastSeq + 100}, lastSeq},
		{"exact time", audit.Point{Time: timeOf(marks["desiredA"])}, marks["desiredA"]},
		{"time between", audit.Point{Time: between}, marks["desiredA"]},
		{"time before", audit.Point{Time: timeOf(1).Add(-time.Second)}, 0},
		{"time after", audit.Point{Time: time.Now().Add(time.Hour)}, lastSeq},
		{"both, seq first", audit.Point{Seq: marks["rejected"], Time: between}, marks["rejected"]},
		{"both, time first", audit.Point{Seq: marks["succeeded"], Time: between}, marks["desiredA"]},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var calls int
			var lastDone, lastTotal uint64
			p, err := audit.FoldUntil(ctx, w.b.JS, "PVE", "pve", c.until, func(done, total uint64) {
				calls++
				if done < lastDone || done > total {
					t.Errorf("progress %d/%d after %d", done, total, lastDone)
				}
				lastDone, lastTotal = done, total
			})
			if err != nil {
				t.Fatal(err)
			}
			if p.LastSeq != c.want {
				t.Fatalf("folded to seq %d, want %d", p.LastSeq, c.want)
			}
			if want := foldDirect(w.evs, c.want); mustJSON(t, p) != mustJSON(t, want) {
				t.Fatalf("fold differs from the projector's:\n got %s\nwant %s", mustJSON(t, p), mustJSON(t, want))
			}
			if c.want > 0 && (calls == 0 || lastDone != lastTotal || lastTotal != c.want) {
				t.Fatalf("progress: %d calls, last %d/%d", calls, lastDone, lastTotal)
			}
		})
	}
	p, _ := audit.FoldUntil(ctx, w.b.JS, "PVE", "pve", audit.Point{Seq: marks["desiredA"]}, nil)
	if v := p.Views[101]; v == nil || v.DesiredSeq != marks["desiredA"] {
		t.Fatalf("view of 101 at desired A: %+v", v)
	}
	if tm, err := audit.EventTime(ctx, w.b.JS, "PVE", marks["desiredA"]); err != nil || !tm.Equal(timeOf(marks["desiredA"])) {
		t.Fatalf("EventTime: %v %v", tm, err)
	}
}

func TestReplayFoldUntilEmptyStream(t *testing.T) {
	b := bustest.New(t)
	p, err := audit.FoldUntil(context.Background(), b.JS, "PVE", "pve", audit.Point{}, nil)
	if err != nil || p.LastSeq != 0 || len(p.Views) != 0 {
		t.Fatalf("%v %+v", err, p)
	}
	es, err := audit.Timeline(context.Background(), b.JS, "PVE", "pve", 101, 0, time.Time{})
	if err != nil || len(es) != 0 {
		t.Fatalf("%v %+v", err, es)
	}
}

func TestHistoryPartitions(t *testing.T) {
	for _, n := range []int{1, 16, 1024} {
		cfg := jetstream.StreamConfig{Name: "PVE", SubjectTransform: &jetstream.SubjectTransformConfig{
			Destination: fmt.Sprintf("pve.{{wildcard(1)}}.{{wildcard(2)}}.{{wildcard(3)}}.{{partition(%d,2,3)}}", n)}}
		if got, err := audit.Partitions(cfg); err != nil || got != n {
			t.Fatalf("%d: %d %v", n, got, err)
		}
	}
	b := bustest.New(t)
	s, _ := b.Stream(context.Background())
	if got, err := audit.Partitions(s.CachedInfo().Config); err != nil || got != b.Config().Partitions {
		t.Fatalf("provisioned stream: %d %v", got, err)
	}
	if _, err := audit.Partitions(jetstream.StreamConfig{Name: "X"}); err == nil {
		t.Fatal("a stream without a transform has partitions")
	}
}

func TestReplayParsePoint(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		in   string
		want audit.Point
		err  bool
	}{
		{"", audit.Point{}, false},
		{"42", audit.Point{Seq: 42}, false},
		{"0", audit.Point{}, true},
		{"2026-11-21T09:30:00Z", audit.Point{Time: time.Date(2026, 11, 21, 9, 30, 0, 0, time.UTC)}, false},
		{"2026-11-21T09:30:00.5+01:00", audit.Point{Time: time.Date(2026, 11, 21, 8, 30, 0, 5e8, time.UTC)}, false},
		{"2h", audit.Point{Time: now.Add(-2 * time.Hour)}, false},
		{"3d", audit.Point{Time: now.Add(-72 * time.Hour)}, false},
		{"-2h", audit.Point{}, true},
		{"yesterday", audit.Point{}, true},
	}
	for _, c := range cases {
		got, err := audit.ParsePoint(c.in, now)
		if (err != nil) != c.err || !got.Time.Equal(c.want.Time) || got.Seq != c.want.Seq {
			t.Errorf("ParsePoint(%q) = %+v, %v; want %+v (error %v)", c.in, got, err, c.want, c.err)
		}
	}
}
