package notify

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/converge-pve/converge/internal/views"
)

// Metadata the handler leaves on a message for the parker: the guest
// record to keep once the notice is parked.
const (
	mdRecordKey = "notify_record_key"
	mdRecord    = "notify_record"
	mdNotice    = "notify_notice"
)

// route is one route's handler and what it remembers.
type route struct {
	n     *Notifier
	r     *Route
	since time.Time // its views consumer's creation
	// throttle, if set, paces its deliveries (watermill's Throttle).
	throttle *middleware.Throttle

	mu      sync.Mutex
	records map[string]*guestRecord // cache of its g.* keys
}

func (rt *route) handle(m *message.Message) error {
	switch m.Metadata.Get(mdSource) {
	case srcViews:
		return rt.view(m)
	case srcEvents:
		return rt.event(m)
	}
	return nil
}

// event delivers a notice the poller recorded, if the route wants it.
func (rt *route) event(m *message.Message) error {
	if op := m.Metadata.Get(mdOp); op != "" {
		return nil // a deletion
	}
	var nt Notice
	if err := json.Unmarshal(m.Payload, &nt); err != nil {
		rt.n.log.Warn().Err(err).Str("route", rt.r.Name).Msg("notify: undecodable notice skipped")
		return nil
	}
	if !rt.r.wants(nt.Trigger) {
		return nil
	}
	return rt.send(m, nt)
}

// view compares a guest's new document with what the route recorded of
// it, delivers the notice a transition causes, and records the document.
func (rt *route) view(m *message.Message) error {
	if op := m.Metadata.Get(mdOp); op != "" {
		return nil // a deletion or purge (converge rebuild): no state
	}
	key := strings.TrimPrefix(m.Metadata.Get(mdSubject), "$KV."+rt.n.opts.ViewsBucket+".")
	cluster, id, ok := strings.Cut(key, ".")
	vmid, err := strconv.Atoi(id)
	if !ok || err != nil || cluster != rt.n.cluster {
		return nil // the cluster document: the poller reads it
	}
	var doc views.GuestDoc
	if err := jsonv1.Unmarshal(m.Payload, &doc); err != nil || doc.View == nil {
		rt.n.log.Warn().Err(err).Str("route", rt.r.Name).Str("key", key).Msg("notify: undecodable guest document skipped")
		return nil
	}
	s := views.Summarise(&doc)
	rkey := guestKey(rt.r.Name, cluster, vmid)
	prev, err := rt.record(m.Context(), rkey)
	if err != nil {
		return err
	}
	var rejected uint64
	if r := doc.View.Rejected; r != nil {
		rejected = r.Seq
	}
	nt, next := guestNotice(prev, s, rejected, rt.since)
	if prev != nil && next.equal(*prev) && nt == nil {
		return nil
	}
	rec, err := json.Marshal(next)
	if err != nil {
		return err
	}
	m.Metadata.Set(mdRecordKey, rkey)
	m.Metadata.Set(mdRecord, string(rec))
	ctx := m.Context()
	if nt != nil && rt.r.wants(nt.Trigger) {
		if err := rt.send(m, *nt); err != nil {
			return err
		}
		// Delivered: recorded even if the notifier is stopping, so that
		// a graceful restart does not send it again.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
	}
	return rt.keep(ctx, rkey, next)
}

// send delivers one notice (an attempt: the Retry middleware repeats the
// handler, and the same notice is found again, with the same key).
func (rt *route) send(m *message.Message, nt Notice) error {
	b, err := json.Marshal(nt)
	if err != nil {
		return err
	}
	m.Metadata.Set(mdNotice, string(b))
	post := func(m *message.Message) ([]*message.Message, error) {
		return nil, deliver(m.Context(), rt.n.client, rt.r, nt)
	}
	if rt.throttle != nil {
		post = rt.throttle.Middleware(post)
	}
	if _, err := post(m); err != nil {
		rt.n.failed.WithLabelValues(rt.r.Name).Inc()
		rt.n.log.Debug().Err(err).Str("route", rt.r.Name).Str("key", nt.Key).Msg("notify: delivery failed")
		return err
	}
	rt.n.sent.WithLabelValues(rt.r.Name).Inc()
	rt.n.log.Info().Str("route", rt.r.Name).Str("key", nt.Key).Str("trigger", string(nt.Trigger)).Msg("notify: delivered")
	return nil
}

// record is what the route recorded of a guest (nil: nothing).
func (rt *route) record(ctx context.Context, key string) (*guestRecord, error) {
	rt.mu.Lock()
	r, ok := rt.records[key]
	rt.mu.Unlock()
	if ok {
		return r, nil
	}
	var g guestRecord
	found, err := getJSON(ctx, rt.n.kv, key, &g)
	if err != nil {
		return nil, fmt.Errorf("notify: record %s: %w", key, err)
	}
	if !found {
		return nil, nil
	}
	rt.mu.Lock()
	rt.records[key] = &g
	rt.mu.Unlock()
	return &g, nil
}

// keep writes a guest's record: after the delivery, so that a restart
// before it finds the transition again (and delivers it again, same key).
func (rt *route) keep(ctx context.Context, key string, g guestRecord) error {
	if err := putJSON(ctx, rt.n.kv, key, g); err != nil {
		return fmt.Errorf("notify: record %s: %w", key, err)
	}
	rt.mu.Lock()
	rt.records[key] = &g
	rt.mu.Unlock()
	return nil
}

// parker is the route's poison queue: a notice its receiver did not take
// after every retry is recorded as parked (and counted), the guest's
// record is kept as if delivered, and the message is acknowledged, so
// the route goes on with the next.
type parker struct{ rt *route }

func (p parker) Publish(_ string, msgs ...*message.Message) error {
	rt := p.rt
	ctx, cancel := context.WithTimeout(rt.n.runCtx, 10*time.Second)
	defer cancel()
	for _, m := range msgs {
		var nt Notice
		if s := m.Metadata.Get(mdNotice); s != "" {
			if err := json.Unmarshal([]byte(s), &nt); err != nil {
				return err
			}
		}
		reason := m.Metadata.Get(middleware.ReasonForPoisonedKey)
		if nt.Key != "" {
			if err := putJSON(ctx, rt.n.kv, parkedKey(rt.r.Name, nt.Key), parkedRecord{Notice: nt, Reason: reason, ParkedAt: rt.n.now().UTC()}); err != nil {
				return err
			}
		}
		if k := m.Metadata.Get(mdRecordKey); k != "" {
			var g guestRecord
			if err := json.Unmarshal([]byte(m.Metadata.Get(mdRecord)), &g); err != nil {
				return err
			}
			if err := rt.keep(ctx, k, g); err != nil {
				return err
			}
		}
		rt.n.parked.WithLabelValues(rt.r.Name).Inc()
		rt.n.log.Warn().Str("route", rt.r.Name).Str("key", nt.Key).Str("reason", reason).Msg("notify: parked after its retries")
	}
	return nil
}

func (parker) Close() error { return nil }
