package bus_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/bus/bustest"
	"github.com/converge-pve/converge/internal/journal"
)

// The journal's hot paths against an embedded server (whose allocations
// count too: it runs in the benchmark's process, as in `converge up`).

func benchAction(vmid int) events.Message {
	m := events.Message{Subject: events.Subject(events.KindAction, "pve", vmid), Header: events.Header{},
		Data: []byte(`{"id":"pve-101-5-1","vmid":101,"cluster":"pve","node":"pve1","kind":"qemu","op":"set_config","set":{"description":"x"},"reason":"config drift: description","desired_seq":5,"basis_seq":7,"attempt":1}`)}
	m.Header.Set(events.HeaderCorrelationID, "desired-pve-101-5")
	return m
}

// BenchmarkAppendAsyncFenced is the planner's publish of an action:
// fenced on its subject, with a deterministic msg-id, acknowledged.
func BenchmarkAppendAsyncFenced(b *testing.B) {
	bb := bustest.New(b)
	a, err := bb.Async(4000, 30*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	last := uint64(0)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		x := journal.FencedAt(last)
		x.MsgID = "pve-101-" + strconv.Itoa(i)
		f, err := a.AppendAsync(benchAction(101), x)
		if err != nil {
			b.Fatal(err)
		}
		ack, err := f.Wait(ctx)
		if err != nil {
			b.Fatal(err)
		}
		last = ack.Seq
	}
}

// BenchmarkAppend is an executor's result: published and waited for.
func BenchmarkAppend(b *testing.B) {
	bb := bustest.New(b)
	ctx := context.Background()
	m := benchAction(101)
	m.Subject = events.Subject(events.KindResult, "pve", 101)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := bb.Append(ctx, m, journal.Expect{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLasts is an executor's fence: a guest's newest action,
// result, desired event and observation in one read.
func BenchmarkLasts(b *testing.B) {
	bb := bustest.New(b)
	ctx := context.Background()
	kinds := []events.Kind{events.KindAction, events.KindResult, events.KindDesired, events.KindObserved}
	for _, k := range kinds {
		m := benchAction(101)
		m.Subject = events.Subject(k, "pve", 101)
		if _, err := bb.Append(ctx, m, journal.Expect{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		es, err := bb.Lasts(ctx, "pve", 101, kinds...)
		if err != nil || len(es) != 4 || es[3] == nil {
			b.Fatal(es, err)
		}
	}
}
