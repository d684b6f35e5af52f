package bus

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// CheckpointBucket is the object store holding planner checkpoints.
const CheckpointBucket = "converge_checkpoints"

// Checkpoints is the planner's checkpoint store, an object store opened on
// first use.
type Checkpoints struct {
	b  *Bus
	mu sync.Mutex
	os jetstream.ObjectStore
}

// Checkpoints returns b's checkpoint store.
func (b *Bus) Checkpoints() *Checkpoints { return &Checkpoints{b: b} }

func (c *Checkpoints) open(ctx context.Context, create bool) (jetstream.ObjectStore, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.os != nil {
		return c.os, nil
	}
	var os jetstream.ObjectStore
	var err error
	// Bound first: a planner without the right to create buckets (NATS
	// permissions, deploy/nats) uses the one an admin provisioned.
	os, err = c.b.JS.ObjectStore(ctx, CheckpointBucket)
	if create && errors.Is(err, jetstream.ErrBucketNotFound) {
		os, err = c.b.JS.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: CheckpointBucket,
			Description: "converge planner checkpoints", Replicas: max(c.b.cfg.Replicas, 1), Storage: jetstream.FileStorage})
		if errors.Is(err, jetstream.ErrBucketExists) {
			os, err = c.b.JS.ObjectStore(ctx, CheckpointBucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoints: %w", err)
	}
	c.os = os
	return os, nil
}

// Open creates or opens the store.
func (c *Checkpoints) Open(ctx context.Context) error {
	_, err := c.open(ctx, true)
	return err
}

// Get returns a checkpoint's bytes, nil if there is none.
func (c *Checkpoints) Get(ctx context.Context, name string) ([]byte, error) {
	os, err := c.open(ctx, true)
	if err != nil {
		return nil, err
	}
	body, err := os.GetBytes(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, nil
	}
	return body, err
}

// Put stores a checkpoint.
func (c *Checkpoints) Put(ctx context.Context, name string, body []byte) error {
	os, err := c.open(ctx, true)
	if err != nil {
		return err
	}
	_, err = os.Put(ctx, jetstream.ObjectMeta{Name: name}, bytes.NewReader(body))
	return err
}

// Delete removes a checkpoint; deleted is false when there was none (or no
// store at all: nothing is created to be deleted).
func (c *Checkpoints) Delete(ctx context.Context, name string) (deleted bool, err error) {
	os, err := c.open(ctx, false)
	if errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	switch err := os.Delete(ctx, name); {
	case err == nil:
		return true, nil
	case errors.Is(err, jetstream.ErrObjectNotFound):
		return false, nil
	default:
		return false, fmt.Errorf("drop checkpoint: %w", err)
	}
}
