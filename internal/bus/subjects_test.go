package bus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/bus/bustest"
	"github.com/converge-pve/converge/internal/natsserver"
)

// wellFormed are subjects converge publishes on; malformed are shapes no
// converge role publishes, which the journal must refuse: a desired event
// on a five-token subject would skip the partition transform (stored
// where no partition's reader and no fence looks) and still be folded.
var (
	wellFormed = []string{"pve.desired.pve.102", "pve.observed.pve.102", "pve.action.pve.102", "pve.result.pve.102",
		"pve.heartbeat.pve", "pve.control.pve", "pve.addresses.pve.102"}
	malformed = []string{
		"pve.desired.pve.102.99999", // the issue's: skips the transform
		"pve.desired.pve.102.3",     // a stored subject, published as such
		"pve.desired.pve",           // a per-guest kind without vmid
		"pve.heartbeat.pve.102",     // a per-cluster kind with one
		"pve.control.pve.x.y",
		"pve.bogus.pve.102", // an unknown kind
		"pve.desired.pve.102.1.2",
		"pve.addresses.pve", // addresses are a guest's
	}
)

// publishRaw publishes once, without the bus's retries on "no responders".
func publishRaw(ctx context.Context, b *bus.Bus, subject string) (*jetstream.PubAck, error) {
	return b.JS.PublishMsg(ctx, &nats.Msg{Subject: subject, Data: []byte(`{"vmid":102,"power":"running"}`)},
		jetstream.WithRetryAttempts(0))
}

func checkSubjects(t *testing.T, ctx context.Context, b *bus.Bus) {
	t.Helper()
	for _, s := range malformed {
		if ack, err := publishRaw(ctx, b, s); err == nil {
			t.Errorf("publish on %s stored as seq %d; want it refused", s, ack.Sequence)
		} else if !errors.Is(err, jetstream.ErrNoStreamResponse) && !errors.Is(err, nats.ErrNoResponders) {
			t.Errorf("publish on %s: %v; want no stream to answer", s, err)
		}
	}
	st, err := b.Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range wellFormed {
		if _, err := publishRaw(ctx, b, s); err != nil {
			t.Errorf("publish on %s: %v", s, err)
		}
	}
	after, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := after.State.Msgs - before.State.Msgs; got != uint64(len(wellFormed)) {
		t.Fatalf("%d events stored for %d well-formed publishes", got, len(wellFormed))
	}
}

// TestStreamRefusesMalformedSubjects: the journal takes only the subjects
// converge publishes; anything else finds no stream (an error to its
// publisher) and is never folded.
func TestStreamRefusesMalformedSubjects(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	checkSubjects(t, ctx, bustest.New(t))
}

// TestProvisionNarrowsAnOldStream: a journal created by an earlier
// converge (subjects pve.>) has its subjects narrowed at provisioning,
// keeping its events.
func TestProvisionNarrowsAnOldStream(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := natsserver.Start(natsserver.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	bc := bus.DefaultConfig()
	bc.InProcess, bc.Logger = s, zerolog.Nop()
	b, err := bus.Connect(ctx, bc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	old := b.StreamConfig()
	old.Subjects = []string{"pve.>"}
	if _, err := b.JS.CreateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := publishRaw(ctx, b, "pve.desired.pve.102.99999"); err != nil {
		t.Fatalf("the old stream refused a five-token subject: %v", err)
	}
	if err := b.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := b.Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("%d events after provisioning, want the old one kept", info.State.Msgs)
	}
	if len(info.Config.Subjects) == 1 && info.Config.Subjects[0] == "pve.>" {
		t.Fatalf("provisioning left the subjects %v", info.Config.Subjects)
	}
	checkSubjects(t, ctx, b)
}
