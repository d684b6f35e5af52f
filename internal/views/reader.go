package views

import (
	"context"
	"errors"
	"fmt"
	"sort"

	json "github.com/go-json-experiment/json/v1"
)

// Reader reads one cluster's documents.
type Reader struct {
	Store   Store
	Cluster string
}

// ClusterDoc returns the cluster document, or nil if no planner wrote one.
func (r Reader) ClusterDoc(ctx context.Context) (*ClusterDoc, error) {
	b, err := r.Store.Get(ctx, ClusterKey(r.Cluster))
	if err != nil || b == nil {
		return nil, err
	}
	var d ClusterDoc
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("views: cluster document: %w", err)
	}
	return &d, nil
}

// Guest returns one guest's document, or nil if there is none.
func (r Reader) Guest(ctx context.Context, vmid int) (*GuestDoc, error) {
	b, err := r.Store.Get(ctx, GuestKey(r.Cluster, vmid))
	if err != nil || b == nil {
		return nil, err
	}
	return decode(b)
}

func decode(b []byte) (*GuestDoc, error) {
	var d GuestDoc
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("views: guest document: %w", err)
	}
	if d.View == nil {
		return nil, errors.New("views: guest document has no view")
	}
	return &d, nil
}

// List returns every guest document of the cluster, by vmid.
func (r Reader) List(ctx context.Context) ([]GuestDoc, error) {
	keys, err := r.Store.Keys(ctx, r.Cluster+".*")
	if err != nil {
		return nil, err
	}
	var out []GuestDoc
	for _, k := range keys {
		if !guestKey(k) {
			continue
		}
		b, err := r.Store.Get(ctx, k)
		if err != nil {
			return nil, err
		}
		if b == nil {
			continue // deleted since it was listed
		}
		d, err := decode(b)
		if err != nil {
			return nil, err
		}
		out = append(out, *d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].View.VMID < out[j].View.VMID })
	return out, nil
}

// Watch streams guest documents as the planner updates them (the current
// ones first), for `converge wait`. Undecodable documents are skipped.
func (r Reader) Watch(ctx context.Context) (<-chan *GuestDoc, error) {
	return r.watch(ctx, false)
}

// Follow is Watch that also says when the current documents are all
// given: one nil document on the channel, then the updates. The HTTP
// stream sends its "synced" line there.
func (r Reader) Follow(ctx context.Context) (<-chan *GuestDoc, error) {
	return r.watch(ctx, true)
}

func (r Reader) watch(ctx context.Context, mark bool) (<-chan *GuestDoc, error) {
	out := make(chan *GuestDoc, 64)
	done, err := r.Store.Watch(ctx, r.Cluster+".*", func(key string, value []byte) {
		var d *GuestDoc
		switch {
		case key == "" && value == nil:
			if !mark {
				return
			}
		case !guestKey(key):
			return
		default:
			var err error
			if d, err = decode(value); err != nil {
				return
			}
		}
		select {
		case out <- d:
		case <-ctx.Done():
		}
	})
	if err != nil {
		return nil, err
	}
	go func() { <-done; close(out) }()
	return out, nil
}
