package bus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/internal/bus/bustest"
	"github.com/converge-pve/converge/internal/lease"
	"github.com/converge-pve/converge/internal/lease/leasetest"
)

// The JetStream lease store keeps the contract the in-memory one is held
// to in lease's tests.
func TestLeaseStoreConformance(t *testing.T) {
	leasetest.Conformance(t, bustest.New(t).LeaseStore)
}

func TestLeaseStoreKeepsJetStreamErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := bustest.New(t)
	s, err := b.LeaseStore(ctx, time.Minute, 1)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := s.Create(ctx, "g.p.0", []byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "g.p.0", []byte("a")); !errors.Is(err, lease.ErrExists) || !errors.Is(err, jetstream.ErrKeyExists) {
		t.Errorf("Create(present) = %v; want lease.ErrExists wrapping jetstream.ErrKeyExists", err)
	}
	var apiErr *jetstream.APIError
	if _, err := s.Update(ctx, "g.p.0", []byte("a"), rev+10); !errors.Is(err, lease.ErrRejected) || !errors.As(err, &apiErr) {
		t.Errorf("Update(wrong revision) = %v; want lease.ErrRejected wrapping a jetstream.APIError", err)
	}
	// An unreachable bus is none of the sentinels.
	b.NC.Close()
	if _, err := s.Update(ctx, "g.p.0", []byte("a"), rev); err == nil || errors.Is(err, lease.ErrRejected) ||
		errors.Is(err, lease.ErrNotFound) || errors.Is(err, lease.ErrExists) {
		t.Errorf("Update on a closed connection = %v; want an error that is no lease sentinel", err)
	}
}
