package events_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/bus/bustest"
)

func streamMsgs(t *testing.T, ctx context.Context, b *bus.Bus) uint64 {
	t.Helper()
	s, err := b.Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func TestPublishDesired(t *testing.T) {
	b := bustest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := b.Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("invalid input is refused and nothing is published", func(t *testing.T) {
		cases := []struct {
			name string
			d    events.Desired
			o    events.PublishOptions
		}{
			{"vmid out of range", events.Desired{VMID: 42}, events.PublishOptions{}},
			{"cores 0", events.Desired{VMID: 101, Cores: ptr(0)}, events.PublishOptions{}},
			{"bad enum", events.Desired{VMID: 101, Power: ptr(events.Power("on"))}, events.PublishOptions{}},
			{"absent with power", events.Desired{VMID: 101, Absent: true, Power: ptr(events.PowerRunning)}, events.PublishOptions{}},
			{"clone from itself", events.Desired{VMID: 101, Clone: &events.Clone{From: 101}}, events.PublishOptions{}},
			{"cluster with a dot", events.Desired{VMID: 101}, events.PublishOptions{Cluster: "a.b"}},
			{"cluster with a wildcard", events.Desired{VMID: 101}, events.PublishOptions{Cluster: "*"}},
		}
		before := streamMsgs(t, ctx, b)
		for _, c := range cases {
			seq, err := events.PublishDesired(ctx, b.JS, &c.d, c.o)
			if err == nil || seq != 0 {
				t.Errorf("%s: PublishDesired = %d, %v; want an error and seq 0", c.name, seq, err)
			}
			var ve *events.ValidationError
			if c.o.Cluster == "" && !errors.As(err, &ve) {
				t.Errorf("%s: error %v is not a *ValidationError", c.name, err)
			}
		}
		if after := streamMsgs(t, ctx, b); after != before {
			t.Fatalf("stream went from %d to %d messages: invalid input was published", before, after)
		}
	})

	t.Run("valid input is published with headers", func(t *testing.T) {
		cases := []struct {
			d           events.Desired
			o           events.PublishOptions
			cluster     string
			publisher   string
			correlation string
		}{
			{events.Desired{VMID: 101, Power: ptr(events.PowerRunning), Cores: ptr(4)},
				events.PublishOptions{Publisher: "billing", CorrelationID: "order-7"}, "pve", "billing", "order-7"},
			{events.Desired{VMID: 202, Kind: ptr(events.LXC), Absent: true},
				events.PublishOptions{Cluster: "lab-2", Publisher: "ci"}, "lab-2", "ci", ""},
			{events.Desired{VMID: 999999999, Tags: ptr([]string{})}, events.PublishOptions{}, "pve", "", ""},
		}
		for _, c := range cases {
			seq, err := events.PublishDesired(ctx, b.JS, &c.d, c.o)
			if err != nil {
				t.Fatalf("PublishDesired(%d): %v", c.d.VMID, err)
			}
			m, err := stream.GetMsg(ctx, seq)
			if err != nil {
				t.Fatalf("stored message %d: %v", seq, err)
			}
			if m.Sequence != seq {
				t.Errorf("returned seq %d, stored %d", seq, m.Sequence)
			}
			info, err := events.ParseSubject(m.Subject)
			if err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("pve.desired.%s.%d.%d", c.cluster, c.d.VMID, info.Partition)
			if m.Subject != want || info.Partition < 0 || info.Kind != events.KindDesired || info.Cluster != c.cluster || info.VMID != c.d.VMID {
				t.Errorf("stored subject %q (%+v), want pve.desired.%s.%d.<partition>", m.Subject, info, c.cluster, c.d.VMID)
			}
			if got := m.Header.Get(events.HeaderSchema); got != "1" {
				t.Errorf("%s = %q, want 1", events.HeaderSchema, got)
			}
			if got := m.Header.Get(events.HeaderPublisher); got != c.publisher {
				t.Errorf("%s = %q, want %q", events.HeaderPublisher, got, c.publisher)
			}
			if got := m.Header.Get(events.HeaderCorrelationID); got != c.correlation {
				t.Errorf("%s = %q, want %q", events.HeaderCorrelationID, got, c.correlation)
			}
			back, err := events.DecodeDesired(m.Data, info.VMID)
			if err != nil {
				t.Fatalf("stored body does not decode: %v", err)
			}
			if mustJSON(t, back) != mustJSON(t, c.d) {
				t.Errorf("stored body %s, published %s", m.Data, mustJSON(t, c.d))
			}
		}
	})
}
