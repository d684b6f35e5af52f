package views

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/planner"
)

// Reader reads one cluster's documents.
type Reader struct {
	KV      jetstream.KeyValue
	Cluster string
}

// ClusterDoc returns the cluster document, or nil if no planner wrote one.
func (r Reader) ClusterDoc(ctx context.Context) (*planner.ClusterDoc, error) {
	e, err := r.KV.Get(ctx, planner.ClusterKey(r.Cluster))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var d planner.ClusterDoc
	if err := json.Unmarshal(e.Value(), &d); err != nil {
		return nil, fmt.Errorf("views: cluster document: %w", err)
	}
	return &d, nil
}

// Guest returns one guest's document, or nil if there is none.
func (r Reader) Guest(ctx context.Context, vmid int) (*planner.GuestDoc, error) {
	e, err := r.KV.Get(ctx, planner.GuestKey(r.Cluster, vmid))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return decode(e.Value())
}

func decode(b []byte) (*planner.GuestDoc, error) {
	var d planner.GuestDoc
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("views: guest document: %w", err)
	}
	if d.View == nil {
		return nil, errors.New("views: guest document has no view")
	}
	return &d, nil
}

// guestKey reports whether a bucket key is a guest document's key
// (<cluster>.<vmid>), not the cluster document or anything else.
func guestKey(k string) bool {
	_, err := strconv.Atoi(k[strings.LastIndexByte(k, '.')+1:])
	return err == nil
}

// List returns every guest document of the cluster, by vmid.
func (r Reader) List(ctx context.Context) ([]planner.GuestDoc, error) {
	lister, err := r.KV.ListKeysFiltered(ctx, r.Cluster+".*")
	if err != nil {
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return nil, nil
		}
		return nil, err
	}
	var out []planner.GuestDoc
	for k := range lister.Keys() {
		if !guestKey(k) {
			continue
		}
		e, err := r.KV.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		d, err := decode(e.Value())
		if err != nil {
			return nil, err
		}
		out = append(out, *d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].View.VMID < out[j].View.VMID })
	return out, nil
}

// Watch streams guest documents as the planner updates them (the current
// ones first), for `converge wait`.
func (r Reader) Watch(ctx context.Context) (<-chan *planner.GuestDoc, error) {
	w, err := r.KV.Watch(ctx, r.Cluster+".*")
	if err != nil {
		return nil, err
	}
	out := make(chan *planner.GuestDoc, 64)
	go func() {
		defer close(out)
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e == nil || !guestKey(e.Key()) || e.Operation() != jetstream.KeyValuePut {
					continue
				}
				d, err := decode(e.Value())
				if err != nil {
					continue
				}
				select {
				case out <- d:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}
