package views

import (
	"context"
	"time"

	"github.com/converge-pve/converge/internal/journal"
)

// Store is the view store as this package uses it: a key-value bucket
// (NATS JetStream KV in production: bus.ViewStore). Its methods name what
// writers, readers and the rebuild need, nothing more.
type Store interface {
	// Get returns a key's value, nil if it has none.
	Get(ctx context.Context, key string) ([]byte, error)
	// Keys lists the keys matching a subject filter.
	Keys(ctx context.Context, filter string) ([]string, error)
	// Watch calls fn, on a goroutine of its own, with the current values
	// of the keys matching filter, then once with key "" and a nil value
	// (the current values are all given), then with each put, until ctx
	// ends; done is closed once fn is called no more.
	Watch(ctx context.Context, filter string, fn func(key string, value []byte)) (done <-chan struct{}, err error)
	// PutAsync writes a key without waiting.
	PutAsync(key string, value []byte) (journal.Future, error)
	// Created is when the bucket was created; ok is false when it is missing.
	Created(ctx context.Context) (at time.Time, ok bool, err error)
	// Provision creates the bucket if it is missing.
	Provision(ctx context.Context) error
	// Drop deletes the bucket; dropped is false when it was missing.
	Drop(ctx context.Context) (dropped bool, err error)
}
