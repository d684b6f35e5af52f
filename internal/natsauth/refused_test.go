package natsauth_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/natsauth"
)

// TestRefusedPublishFailsAtOnce: a write NATS refuses (the planner's user
// publishing desired state, as an HTTP API served from the planner's
// process did) fails at once, naming the user and the subject, instead of
// waiting out its deadline and reporting "context deadline exceeded".
func TestRefusedPublishFailsAtOnce(t *testing.T) {
	pw := setPasswords(t)
	url := startShipped(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	provisioned(t, ctx, url, pw, 1)
	bc := bus.DefaultConfig()
	bc.URLs, bc.User, bc.Password, bc.Logger = url, "planner", pw[natsauth.Planner], zerolog.Nop()
	b, err := bus.Connect(ctx, bc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	m, err := events.DesiredMessage(&events.Desired{VMID: 101}, events.PublishOptions{Publisher: "test"})
	if err != nil {
		t.Fatal(err)
	}
	// A deadline far beyond "at once": the refusal must end it, not time.
	pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
	defer pcancel()
	_, err = b.Append(pctx, m, journal.Expect{})
	if !bus.IsPermission(err) || pctx.Err() != nil {
		t.Fatalf("refused publish: %v (deadline reached: %v)", err, pctx.Err())
	}
	if msg := err.Error(); !strings.Contains(msg, `"planner"`) || !strings.Contains(msg, "pve.desired.pve.101") {
		t.Fatalf("the error names neither the user nor the subject: %s", msg)
	}
}
