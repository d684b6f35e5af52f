package bus

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestViewStoreRetriesALostRequest: a JetStream API request that a
// cluster drops while it fails over gets no answer at all (CI met it in
// TestNATSClusterStreamLeaderLoss: `converge wait --timeout 2m` spent its
// two minutes on one unanswered stream info request for the views bucket).
// Each request is bounded and asked again, so the second one answers.
func TestViewStoreRetriesALostRequest(t *testing.T) {
	// A plain NATS server whose only "JetStream" is this responder: it
	// drops the first stream info request and answers the second.
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	t.Cleanup(s.Shutdown)
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	created := time.Date(2026, 11, 27, 21, 0, 0, 0, time.UTC)
	var asked atomic.Int32
	if _, err := nc.Subscribe("$JS.API.STREAM.INFO.KV_views", func(m *nats.Msg) {
		if asked.Add(1) == 1 {
			return // lost
		}
		_ = m.Respond([]byte(`{"type":"io.nats.jetstream.api.v1.stream_info_response","config":{"name":"KV_views","subjects":["$KV.views.>"]},"created":"` +
			created.Format(time.RFC3339Nano) + `","state":{}}`))
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	b := &Bus{NC: nc, JS: js, cfg: Config{Bucket: "views"}}
	vs, err := b.ViewStore()
	if err != nil {
		t.Fatal(err)
	}
	// Far longer than one attempt: without them the call waits it out.
	ctx, cancel := context.WithTimeout(context.Background(), 6*apiAttempt)
	defer cancel()
	at, ok, err := vs.Created(ctx)
	if err != nil || !ok || !at.Equal(created) {
		t.Fatalf("Created = %v, %v, %v; want %v, true, nil", at, ok, err, created)
	}
	if n := asked.Load(); n != 2 {
		t.Fatalf("%d stream info requests, want 2 (one lost, one answered)", n)
	}
}
