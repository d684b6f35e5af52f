package control_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/bus/bustest"
	"github.com/converge-pve/converge/internal/control"
	"github.com/converge-pve/converge/internal/journal"
)

// TestResyncRoutedAndJournalled: a resync request reaches the handler live
// over the process's own connection (no connection of its own), and the
// publisher still gets the stream's acknowledgement (the router must not
// answer the publish's reply subject). An undecodable request goes to the
// poison queue (metric) and the router goes on routing.
func TestResyncRoutedAndJournalled(t *testing.T) {
	b := bustest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := make(chan struct{}, 8)
	reg := prometheus.NewRegistry()
	r, err := control.New("pve", control.Handlers{Resync: func() { got <- struct{}{} }}, zerolog.Nop(), reg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, b) }()
	<-r.Running()
	// The subscription is made before the router runs: the first request
	// is routed.
	seq, err := control.PublishResync(ctx, b, "pve", "test", time.Now())
	if err != nil {
		t.Fatalf("publish resync: %v", err)
	}
	select {
	case <-got:
	case <-ctx.Done():
		t.Fatal("resync never routed")
	}
	s, _ := b.Stream(ctx)
	if m, err := s.GetMsg(ctx, seq); err != nil || m.Subject != "pve.control.pve" {
		t.Fatalf("resync %d not journalled: %v %v", seq, m, err)
	}
	// Poison: an undecodable request, and one reported by another part of
	// the process.
	if _, err := b.Append(ctx, events.Message{Subject: "pve.control.pve", Data: []byte(`{"command":`)}, journal.Expect{}); err != nil {
		t.Fatal(err)
	}
	r.Poison("planner", "pve.desired.pve.101.3", 42, context.Canceled)
	// The router goes on: a resync after the poison is routed.
	if _, err := control.PublishResync(ctx, b, "pve", "test", time.Now()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got:
	case <-ctx.Done():
		t.Fatal("resync after a poisoned request never routed")
	}
	poisoned := func() float64 {
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == "converge_poisoned_total" {
				return mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		return 0
	}
	for deadline := time.Now().Add(10 * time.Second); poisoned() < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("poisoned %v messages, want 2", poisoned())
		}
		time.Sleep(5 * time.Millisecond) // polling a condition
	}
	if n, err := testutil.GatherAndCount(reg, "converge_control_handler_execution_time_seconds"); err != nil || n == 0 {
		t.Fatalf("no router metrics: %d, %v", n, err)
	}
	// Another cluster's request is not routed here.
	if _, err := control.PublishResync(ctx, b, "other", "test", time.Now()); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("router: %v", err)
	}
	select {
	case <-got:
		t.Fatal("another cluster's resync was routed")
	default:
	}
}

// Per-guest requests (approve, pause, resume, release) are the fold's to
// act on: the router says nothing of them at warn (every approve logged
// "unknown control command ignored"); an unknown command still warns.
func TestPerGuestRequestsNotWarned(t *testing.T) {
	b := bustest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var buf syncBuffer
	got := make(chan struct{}, 1)
	r, err := control.New("pve", control.Handlers{Resync: func() { got <- struct{}{} }}, zerolog.New(&buf).Level(zerolog.WarnLevel), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = r.Run(ctx, b) }()
	<-r.Running()
	for _, cmd := range []string{events.CommandApprove, events.CommandPause, events.CommandResume, events.CommandRelease} {
		if _, err := control.Publish(ctx, b, "pve", events.Control{Meta: events.NewMeta("alice", "", time.Now()), Command: cmd, VMIDs: []int{101}}); err != nil {
			t.Fatal(err)
		}
	}
	// A resync after them: once it is routed, so were they.
	if _, err := control.PublishResync(ctx, b, "pve", "test", time.Now()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got:
	case <-ctx.Done():
		t.Fatal("resync never routed")
	}
	if s := buf.String(); strings.Contains(s, "unknown control command") {
		t.Fatalf("per-guest requests warned about:\n%s", s)
	}
}

// syncBuffer is a bytes.Buffer safe for the router's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
