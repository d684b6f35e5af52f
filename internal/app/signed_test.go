package app_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/app"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/internal/pvesim/pvesimtest"
	"github.com/converge-pve/converge/planner"
	"github.com/converge-pve/converge/projector"
)

// Signed mode (--require-signed, issue 18): unsigned, forged, altered and
// replayed desired events are rejected with the reason in status and
// change nothing in Proxmox; a signed one converges.
func TestSignedMode(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	_, mallory, _ := ed25519.GenerateKey(rand.Reader)
	auth := &projector.Auth{Keys: map[string]ed25519.PublicKey{"ci": pub}, Require: true}
	p := startPipeline(t, pvesim.Options{Guests: 4, Nodes: 1}, verifyOff, func(c *app.Config) {
		c.Planner.Planner.Auth, c.Executor.Auth = auth, auth
	})
	p.pass(t)
	const vmid = 101
	ctx := pvesimtest.Context(t)
	publish := func(m events.Message) uint64 {
		t.Helper()
		ack, err := p.a.Bus().Append(ctx, m, journal.Expect{})
		if err != nil {
			t.Fatal(err)
		}
		return ack.Seq
	}
	message := func(desc string, key ed25519.PrivateKey, at time.Time) events.Message {
		t.Helper()
		m, err := events.DesiredMessage(&events.Desired{VMID: vmid, Description: &desc}, events.PublishOptions{Publisher: "billing"})
		if err != nil {
			t.Fatal(err)
		}
		if key != nil {
			if err := events.SignMessage(&m, key, "ci", at); err != nil {
				t.Fatal(err)
			}
		}
		return m
	}
	before := p.sim.Mutations()
	good := message("signed by ci", priv, time.Now())
	altered := message("signed by ci", priv, time.Now())
	altered.Data = []byte(strings.Replace(string(altered.Data), "signed by ci", "altered in transit", 1))
	cases := []struct {
		name string
		m    events.Message
		says string
	}{
		{"unsigned", message("unsigned", nil, time.Time{}), "unsigned"},
		{"forged", message("forged", mallory, time.Now()), "does not verify"},
		{"altered", altered, "does not verify"},
	}
	for _, c := range cases {
		seq := publish(c.m)
		doc := p.waitState(t, vmid, seq, planner.Rejected, 20*time.Second)
		if doc == nil || doc.Status.Kind != planner.Rejected || !strings.Contains(doc.Status.Reason, c.says) {
			t.Fatalf("%s: %+v", c.name, doc)
		}
	}
	if doc := p.settleIn(t, vmid); doc.Status.Kind != planner.Rejected {
		t.Fatalf("after more passes: %+v, want still rejected", doc.Status)
	}
	if n := p.sim.Mutations() - before; n != 0 {
		t.Fatalf("rejected events caused %d Proxmox mutations", n)
	}
	seq := publish(good)
	doc := p.waitState(t, vmid, seq, planner.Converged, 20*time.Second)
	if doc == nil || doc.Status.Kind != planner.Converged || doc.View.SignedBy != "ci" {
		t.Fatalf("signed event: %+v", doc)
	}
	if g, _ := p.sim.Guest(vmid); !strings.HasPrefix(g.Config["description"], "signed by ci") {
		t.Fatalf("description %q", g.Config["description"])
	}
	// The same signed message again: a replay.
	seq = publish(good)
	doc = p.waitState(t, vmid, seq, planner.Rejected, 20*time.Second)
	if doc == nil || !strings.Contains(doc.Status.Reason, "replayed") {
		t.Fatalf("replay: %+v", doc)
	}
}
