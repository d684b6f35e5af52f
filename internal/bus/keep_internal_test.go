package bus

import (
	"cmp"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/natsserver"
)

// TestKeepStream: provisioning creates the keep stream sourcing the
// journal's desired, action and result subjects (not observations nor
// heartbeats), a second provisioning leaves it as it is, and Kept reads
// the sourced entries back under their journal sequence and stored
// subject, within the asked range.
func TestKeepStream(t *testing.T) {
	srv, err := natsserver.Start(natsserver.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bc := DefaultConfig()
	bc.InProcess, bc.Name, bc.MaxBytes = srv, "keep", 1<<30
	b, err := Connect(ctx, bc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if err := b.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	ks, err := b.JS.Stream(ctx, b.KeepStream())
	if err != nil {
		t.Fatal(err)
	}
	if have := ks.CachedInfo().Config; !sameKeep(have, b.KeepStreamConfig()) || have.MaxMsgsPerSubject != KeepPerSubject {
		t.Fatalf("keep stream as created differs from what provisioning wants: %+v", have)
	}
	pub := func(subject string) uint64 {
		a, err := b.Publish(ctx, subject, []byte(`{}`), nil)
		if err != nil {
			t.Fatal(err)
		}
		return a.Sequence
	}
	d1 := pub(events.Subject(events.KindDesired, "pve", 101))
	pub(events.Subject(events.KindObserved, "pve", 101))
	pub(events.ClusterSubject(events.KindHeartbeat, "pve"))
	a1 := pub(events.Subject(events.KindAction, "pve", 101))
	r1 := pub(events.Subject(events.KindResult, "pve", 101))
	for deadline := time.Now().Add(10 * time.Second); ; {
		info, err := ks.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("keep stream holds %d entries, want 3", info.State.Msgs)
		}
		time.Sleep(5 * time.Millisecond) // polling the server's sourcing
	}
	kept, err := b.Kept(ctx, 0, r1+1)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		seq  uint64
		kind events.Kind
	}{{d1, events.KindDesired}, {a1, events.KindAction}, {r1, events.KindResult}}
	if len(kept) != len(want) {
		t.Fatalf("kept %+v, want seqs %d, %d, %d", kept, d1, a1, r1)
	}
	for i, w := range want {
		if kept[i].Seq != w.seq || kept[i].Subject != b.StoredSubject(w.kind, "pve", 101) || kept[i].Header.Get(streamSourceHeader) != "" {
			t.Fatalf("kept[%d] = seq %d %s (header %v), want seq %d %s", i, kept[i].Seq, kept[i].Subject, kept[i].Header, w.seq, w.kind)
		}
	}
	if kept, _ := b.Kept(ctx, d1, r1); len(kept) != 1 || kept[0].Seq != a1 {
		t.Fatalf("kept in (%d, %d): %+v", d1, r1, kept)
	}
	created := ks.CachedInfo().Created
	if err := b.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if ks, err = b.JS.Stream(ctx, b.KeepStream()); err != nil || !ks.CachedInfo().Created.Equal(created) {
		t.Fatalf("second provisioning: %v, created %v then %v", err, created, ks.CachedInfo().Created)
	}
}

// TestKeepStreamOnlyWithLimits: a journal without retention limits drops
// no desired event, action or result, so provisioning makes no keep
// stream (it would copy every one of them); Kept then reads nothing. Once
// made, a keep stream stays when the limits go: it holds what the journal
// may have dropped meanwhile.
func TestKeepStreamOnlyWithLimits(t *testing.T) {
	srv := testServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	connect := func(maxAge time.Duration) *Bus {
		c := DefaultConfig()
		c.MaxAge = maxAge
		return testConnect(t, ctx, srv, c, true)
	}
	b := connect(0)
	if _, err := b.JS.Stream(ctx, b.KeepStream()); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("keep stream of a journal without limits: %v, want none", err)
	}
	if _, err := b.Publish(ctx, events.Subject(events.KindDesired, "pve", 101), []byte(`{}`), nil); err != nil {
		t.Fatal(err)
	}
	if kept, err := b.Kept(ctx, 0, 100); err != nil || len(kept) != 0 {
		t.Fatalf("Kept without a keep stream: %+v, %v", kept, err)
	}
	connect(time.Hour)
	if _, err := b.JS.Stream(ctx, b.KeepStream()); err != nil {
		t.Fatalf("keep stream once the journal has an age limit: %v", err)
	}
	b = connect(0)
	if _, err := b.JS.Stream(ctx, b.KeepStream()); err != nil {
		t.Fatalf("keep stream after the limits went: %v", err)
	}
	if info, err := b.JS.Stream(ctx, b.cfg.Stream); err != nil || limited(info.CachedInfo().Config) {
		t.Fatalf("journal after the limits went: %v", err)
	}
}

// TestLimitsWaitForTheKeepStream: limits given to a journal that has run
// without them (so without a keep stream) apply only once the new keep
// stream has copied it. The byte limit here keeps a small part of the
// journal: applied at once, it would drop most guests' only desired
// event before the keep stream, which sources from the journal's start,
// had read it.
func TestLimitsWaitForTheKeepStream(t *testing.T) {
	srv := testServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bc2 := DefaultConfig()
	bc2.Name = "before"
	b := testConnect(t, ctx, srv, bc2, true)
	const guests = 2000
	body := []byte(`{"vmid":0,"description":"` + strings.Repeat("x", 400) + `"}`)
	for id := 100; id < 100+guests; id++ {
		if _, err := b.JS.PublishAsync(events.Subject(events.KindDesired, "pve", id), body); err != nil {
			t.Fatal(err)
		}
		if _, err := b.JS.PublishAsync(events.Subject(events.KindObserved, "pve", id), body); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-b.JS.PublishAsyncComplete():
	case <-ctx.Done():
		t.Fatal("publishes not acknowledged")
	}
	bc3 := DefaultConfig()
	bc3.Name, bc3.MaxBytes = "after", 64<<10
	testConnect(t, ctx, srv, bc3, true)
	s, err := b.Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info := s.CachedInfo(); info.Config.MaxBytes != 64<<10 || info.State.FirstSeq <= 1 {
		t.Fatalf("journal after provisioning: max bytes %d, first seq %d: the limit did not apply", info.Config.MaxBytes, info.State.FirstSeq)
	}
	kept, err := b.Kept(ctx, 0, 1<<62)
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != guests {
		t.Fatalf("the keep stream holds %d desired events once the limit applied, want every guest's %d", len(kept), guests)
	}
}

// TestLastSeqMatching: the newest entry matching a wildcard filter, and 0
// where none matches.
func TestLastSeqMatching(t *testing.T) {
	b := newTestBus(t)
	ctx := context.Background()
	var last uint64
	for _, id := range []int{101, 205, 150} {
		a, err := b.Publish(ctx, events.Subject(events.KindDesired, "pve", id), []byte(`{}`), nil)
		if err != nil {
			t.Fatal(err)
		}
		last = a.Sequence
		if _, err := b.Publish(ctx, events.Subject(events.KindObserved, "pve", id), []byte(`{}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	if seq, err := b.lastSeqMatching(ctx, "pve.desired.>"); err != nil || seq != last {
		t.Fatalf("newest desired: %d, %v; want %d", seq, err, last)
	}
	if seq, err := b.lastSeqMatching(ctx, "pve.result.>"); err != nil || seq != 0 {
		t.Fatalf("newest result: %d, %v; want 0", seq, err)
	}
}

// testServer starts an embedded server of the test's own, admitting
// users (anyone if none).
func testServer(t *testing.T, users ...*server.User) *server.Server {
	t.Helper()
	srv, err := natsserver.Start(natsserver.Options{DataDir: t.TempDir(), Users: users})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	return srv
}

// testConnect connects c to srv (named for the test unless c names it)
// and provisions it when provision is set.
func testConnect(t *testing.T, ctx context.Context, srv *server.Server, c Config, provision bool) *Bus {
	t.Helper()
	c.InProcess, c.Name = srv, cmp.Or(c.Name, t.Name())
	b, err := Connect(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if provision {
		if err := b.Provision(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// newTestBus is a provisioned bus on a server of the test's own.
func newTestBus(t *testing.T) *Bus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return testConnect(t, ctx, testServer(t), DefaultConfig(), true)
}
