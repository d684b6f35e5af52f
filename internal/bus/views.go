package bus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/internal/journal"
)

// ViewStore is the views bucket (Config.Bucket) as package views uses it:
// documents by key, written asynchronously, read directly or watched, and
// the bucket itself (its creation time tells a bucket dropped and created
// again). It satisfies views.Store.
type ViewStore struct {
	b  *Bus
	js jetstream.JetStream // asynchronous puts: their own window

	mu sync.Mutex
	kv jetstream.KeyValue // looked up once; again after the bucket went
}

// maxViewPuts bounds unacknowledged view writes, and viewPutTimeout the
// wait for each: a write lost with a dying server is rewritten.
const (
	maxViewPuts    = 4096
	viewPutTimeout = 15 * time.Second
)

// ViewStore returns the views bucket of b.
func (b *Bus) ViewStore() (*ViewStore, error) {
	js, err := jetstream.New(b.NC, jetstream.WithPublishAsyncMaxPending(maxViewPuts), jetstream.WithPublishAsyncTimeout(viewPutTimeout))
	if err != nil {
		return nil, fmt.Errorf("bus: jetstream: %w", err)
	}
	return &ViewStore{b: b, js: js}, nil
}

// bucket returns the bucket's handle: a lookup is a request to the
// server, so it is made once, and again only once the bucket was found
// gone (dropped by converge rebuild, and created again).
func (s *ViewStore) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	s.mu.Lock()
	kv := s.kv
	s.mu.Unlock()
	if kv != nil {
		return kv, nil
	}
	// Looked up without the lock: a caller without a deadline (a stream)
	// retrying through an outage must not hold up the others.
	err := attempts(ctx, apiAttempt, func(ctx context.Context) (err error) {
		kv, err = s.b.JS.KeyValue(ctx, s.b.cfg.Bucket)
		return err
	}, nil)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kv == nil {
		s.kv = kv
	}
	return s.kv, nil
}

// gone forgets the handle when err says the bucket is no more.
func (s *ViewStore) gone(err error) error {
	if errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
		s.mu.Lock()
		s.kv = nil
		s.mu.Unlock()
	}
	return err
}

// Bucket is the bucket's name.
func (s *ViewStore) Bucket() string { return s.b.cfg.Bucket }

// Get returns a key's value, nil if it has none.
func (s *ViewStore) Get(ctx context.Context, key string) ([]byte, error) {
	kv, err := s.bucket(ctx)
	if err != nil {
		return nil, err
	}
	var e jetstream.KeyValueEntry
	err = attempts(ctx, apiAttempt, func(ctx context.Context) (err error) {
		e, err = kv.Get(ctx, key)
		return err
	}, nil)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, s.gone(err)
	}
	return e.Value(), nil
}

// Keys lists the keys matching a subject filter (none: empty).
func (s *ViewStore) Keys(ctx context.Context, filter string) ([]string, error) {
	kv, err := s.bucket(ctx)
	if err != nil {
		return nil, err
	}
	lister, err := kv.ListKeysFiltered(ctx, filter)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, s.gone(err)
	}
	defer func() { _ = lister.Stop() }()
	var out []string
	for k := range lister.Keys() {
		out = append(out, k)
	}
	return out, nil
}

// Watch calls fn with the current values of the keys matching filter, then
// with "" and nil (caught up), then with each put, until ctx ends;
// deletions and purges are left out. done is closed once fn is called no
// more.
func (s *ViewStore) Watch(ctx context.Context, filter string, fn func(key string, value []byte)) (<-chan struct{}, error) {
	kv, err := s.bucket(ctx)
	if err != nil {
		return nil, err
	}
	w, err := kv.Watch(ctx, filter)
	if err != nil {
		return nil, s.gone(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			_ = w.Stop()
			// nats.go's delivery blocks on a full Updates channel, holding
			// its goroutine and what it buffered until someone reads: drain
			// until it closes it, or every stream that ended early (a
			// console closed before it caught up) would leak one.
			for range w.Updates() {
			}
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				switch {
				case e == nil: // the watcher's mark: the current values are given
					fn("", nil)
				case e.Operation() == jetstream.KeyValuePut:
					fn(e.Key(), e.Value())
				}
			}
		}
	}()
	return done, nil
}

// PutAsync writes a key without waiting (a KV put is a publish on the
// bucket's subject).
func (s *ViewStore) PutAsync(key string, value []byte) (journal.Future, error) {
	f, err := s.js.PublishAsync("$KV."+s.b.cfg.Bucket+"."+key, value)
	if err != nil {
		return nil, err
	}
	return future{f, s.b.writes}, nil
}

// Created is when the bucket was created; ok is false when it is missing.
func (s *ViewStore) Created(ctx context.Context) (at time.Time, ok bool, err error) {
	var st jetstream.Stream
	err = attempts(ctx, apiAttempt, func(ctx context.Context) (err error) {
		st, err = s.b.JS.Stream(ctx, "KV_"+s.b.cfg.Bucket)
		return err
	}, nil)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		_ = s.gone(err)
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, err
	}
	return st.CachedInfo().Created, true, nil
}

// Provision creates the bucket if it is missing (or updates its settings).
func (s *ViewStore) Provision(ctx context.Context) error { return s.b.ProvisionViews(ctx) }

// Drop deletes the bucket; dropped is false when it was missing.
func (s *ViewStore) Drop(ctx context.Context) (dropped bool, err error) {
	_ = s.gone(jetstream.ErrBucketNotFound) // whatever happens, look it up again
	switch err := s.b.JS.DeleteKeyValue(ctx, s.b.cfg.Bucket); {
	case err == nil:
		return true, nil
	case errors.Is(err, jetstream.ErrBucketNotFound):
		return false, nil
	default:
		return false, fmt.Errorf("drop views bucket %q: %w", s.b.cfg.Bucket, err)
	}
}
