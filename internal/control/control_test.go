package control_test

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/internal/bus/bustest"
	"github.com/converge-pve/converge/internal/control"
)

// TestResyncRoutedAndJournalled: a resync request reaches the handler live,
// and the publisher still gets the stream's acknowledgement (the router
// must not answer the publish's reply subject).
func TestResyncRoutedAndJournalled(t *testing.T) {
	b := bustest.New(t)
	own := bustest.Connect(t, bustest.Server(t, b))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := make(chan struct{}, 8)
	done := make(chan error, 1)
	go func() {
		done <- control.Run(ctx, own.NC, "pve", control.Handlers{Resync: func() { got <- struct{}{} }}, zerolog.Nop())
	}()
	// The router subscribes asynchronously; publish until one request is
	// routed. Every publish must be acknowledged by the stream.
	var seqs []uint64
	for routed := false; !routed; {
		seq, err := control.PublishResync(ctx, b, "pve", "test")
		if err != nil {
			t.Fatalf("publish resync: %v", err)
		}
		seqs = append(seqs, seq)
		select {
		case <-got:
			routed = true
		case <-time.After(50 * time.Millisecond): // bounded retry while the subscription starts
		case <-ctx.Done():
			t.Fatal("resync never routed")
		}
	}
	s, _ := b.Stream(ctx)
	for _, seq := range seqs {
		m, err := s.GetMsg(ctx, seq)
		if err != nil || m.Subject != "pve.control.pve" {
			t.Fatalf("resync %d not journalled: %v %v", seq, m, err)
		}
	}
	// Another cluster's request is not routed here.
	if _, err := control.PublishResync(ctx, b, "other", "test"); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("router: %v", err)
	}
}
