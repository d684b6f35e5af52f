package bus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/bus/bustest"
)

// LastMsgs answers, in one request, what one direct get per subject
// answers; subjects without a message are absent.
func TestLastMsgsMatchesDirectGets(t *testing.T) {
	b := bustest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, p := range []struct {
		kind events.Kind
		vmid int
		body string
	}{
		{events.KindDesired, 101, `{"vmid":101,"description":"a"}`},
		{events.KindObserved, 101, `{"vmid":101}`},
		{events.KindDesired, 101, `{"vmid":101,"description":"b"}`},
		{events.KindAction, 102, `{"id":"x"}`},
	} {
		if _, err := b.Publish(ctx, events.Subject(p.kind, "pve", p.vmid), []byte(p.body), nil); err != nil {
			t.Fatal(err)
		}
	}
	s, err := b.Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kinds := []events.Kind{events.KindAction, events.KindResult, events.KindDesired, events.KindObserved}
	var subjects []string
	for _, k := range kinds {
		subjects = append(subjects, b.StoredSubject(k, "pve", 101))
	}
	got, err := b.LastMsgs(ctx, subjects)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d messages, want the desired and the observed one: %v", len(got), got)
	}
	for _, subj := range subjects {
		want, err := s.GetLastMsgForSubject(ctx, subj)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			if got[subj] != nil {
				t.Errorf("%s: got seq %d, want none", subj, got[subj].Sequence)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		g := got[subj]
		if g == nil || g.Sequence != want.Sequence || g.Subject != want.Subject || string(g.Data) != string(want.Data) || !g.Time.Equal(want.Time) {
			t.Errorf("%s: got %+v, want %+v", subj, g, want)
		}
	}
	if string(got[subjects[2]].Data) != `{"vmid":101,"description":"b"}` {
		t.Errorf("newest desired: %s", got[subjects[2]].Data)
	}

	// Nothing stored for any subject: an empty answer, not an error.
	none, err := b.LastMsgs(ctx, []string{b.StoredSubject(events.KindResult, "pve", 999)})
	if err != nil || len(none) != 0 {
		t.Fatalf("got %v, %v", none, err)
	}
}

// A stream without direct gets cannot answer: callers are told to read one
// subject at a time.
func TestLastMsgsUnsupported(t *testing.T) {
	b := bustest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := b.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "NODIRECT", Subjects: []string{"nodirect.>"}}); err != nil {
		t.Fatal(err)
	}
	bc := bus.DefaultConfig()
	bc.InProcess, bc.Stream = bustest.Server(t, b), "NODIRECT"
	other, err := bus.Connect(ctx, bc)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.LastMsgs(ctx, []string{"nodirect.a"}); !errors.Is(err, bus.ErrBatchGetUnsupported) {
		t.Fatalf("got %v", err)
	}
}
