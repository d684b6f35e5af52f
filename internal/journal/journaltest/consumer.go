package journaltest

import (
	"context"
	"strings"
	"sync"

	"github.com/converge-pve/converge/internal/journal"
)

// consumer is a durable work consumer: it hands out each matching entry
// once, and again after Redeliver until it is acknowledged or terminated.
type consumer struct {
	j    *Journal
	spec journal.WorkSpec
	fn   func(journal.Delivery)

	mu        sync.Mutex
	next      uint64            // the next sequence to consider
	delivered map[uint64]uint64 // unacknowledged: sequence → deliveries
	settled   map[uint64]bool   // acknowledged or terminated
	stopped   bool
	kick      chan struct{}
}

// Consume implements journal.Consumer. Deliveries run on one goroutine per
// consumer, in sequence order.
func (j *Journal) Consume(ctx context.Context, spec journal.WorkSpec, fn func(journal.Delivery)) (func(), error) {
	j.mu.Lock()
	c := j.consumers[spec.Durable]
	if c == nil {
		c = &consumer{j: j, spec: spec, next: 1, delivered: map[uint64]uint64{}, settled: map[uint64]bool{}}
		j.consumers[spec.Durable] = c
	}
	c.mu.Lock()
	c.fn, c.stopped, c.kick = fn, false, make(chan struct{}, 1)
	c.mu.Unlock()
	j.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); c.run(ctx) }()
	c.wake()
	return func() {
		c.mu.Lock()
		c.stopped = true
		c.mu.Unlock()
		cancel()
		wg.Wait()
	}, nil
}

// Redeliver hands the unacknowledged entries of a consumer out again, as
// the server does after AckWait.
func (j *Journal) Redeliver(durable string) {
	j.mu.Lock()
	c := j.consumers[durable]
	j.mu.Unlock()
	if c == nil {
		return
	}
	c.mu.Lock()
	for seq := range c.delivered {
		if seq < c.next {
			c.next = seq
		}
	}
	c.mu.Unlock()
	c.wake()
}

func (c *consumer) wake() {
	c.mu.Lock()
	k := c.kick
	c.mu.Unlock()
	if k != nil {
		select {
		case k <- struct{}{}:
		default:
		}
	}
}

func (c *consumer) run(ctx context.Context) {
	for {
		for c.deliverOne() {
		}
		select {
		case <-ctx.Done():
			return
		case <-c.kick:
		}
	}
}

// deliverOne hands out the next matching entry; false when there is none.
func (c *consumer) deliverOne() bool {
	entries, first := c.j.Entries(), c.j.firstSeq()
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return false
	}
	for ; c.next <= uint64(len(entries)); c.next++ {
		e := entries[c.next-1]
		if e.Seq < first || !matches(c.spec.Filter, e.Subject) { // trimmed: gone
			continue
		}
		n, pending := c.delivered[e.Seq]
		if c.settled[e.Seq] {
			continue
		}
		if c.spec.MaxAckPending > 0 && !pending && len(c.delivered) >= c.spec.MaxAckPending {
			c.mu.Unlock()
			return false
		}
		c.delivered[e.Seq] = n + 1
		c.next++
		fn := c.fn
		d := &Delivery{c: c, e: e, n: n + 1}
		c.mu.Unlock()
		fn(d)
		return true
	}
	c.mu.Unlock()
	return false
}

func (c *consumer) settle(seq uint64) {
	c.mu.Lock()
	delete(c.delivered, seq)
	c.settled[seq] = true
	c.mu.Unlock()
	c.wake()
}

// matches is NATS subject matching of a filter with '*' and '>'.
func matches(filter, subject string) bool {
	f, s := strings.Split(filter, "."), strings.Split(subject, ".")
	for i, t := range f {
		switch {
		case t == ">":
			return len(s) > i
		case i >= len(s):
			return false
		case t != "*" && t != s[i]:
			return false
		}
	}
	return len(f) == len(s)
}

// Delivery is one delivery of an entry; it records what its worker did
// with it.
type Delivery struct {
	c *consumer // nil for a delivery made with Deliver
	e journal.Entry
	n uint64

	mu                      sync.Mutex
	acks, terms, inProgress int
}

// Deliver makes the n-th delivery of an entry outside any consumer, for
// tests that hand deliveries to a worker themselves.
func Deliver(e journal.Entry, n uint64) *Delivery { return &Delivery{e: e, n: n} }

// Entry implements journal.Delivery.
func (d *Delivery) Entry() journal.Entry { return d.e }

// Delivered implements journal.Delivery.
func (d *Delivery) Delivered() uint64 { return d.n }

// InProgress implements journal.Delivery.
func (d *Delivery) InProgress() error {
	d.mu.Lock()
	d.inProgress++
	d.mu.Unlock()
	return nil
}

// Term implements journal.Delivery.
func (d *Delivery) Term() error {
	d.mu.Lock()
	d.terms++
	d.mu.Unlock()
	if d.c != nil {
		d.c.settle(d.e.Seq)
	}
	return nil
}

// Ack implements journal.Delivery.
func (d *Delivery) Ack(context.Context) error {
	d.mu.Lock()
	d.acks++
	d.mu.Unlock()
	if d.c != nil {
		d.c.settle(d.e.Seq)
	}
	return nil
}

// Counts returns how often the worker acknowledged, terminated and sent
// InProgress for this delivery.
func (d *Delivery) Counts() (acks, terms, inProgress int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.acks, d.terms, d.inProgress
}
