package projector_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/projector"
)

// signedEv is desired event seq for guest 101 as the journal stores it,
// signed by priv as keyID at signedAt, journalled at journalAt.
func signedEv(t *testing.T, seq uint64, body string, priv ed25519.PrivateKey, keyID string, signedAt, journalAt time.Time) projector.Event {
	t.Helper()
	m, err := events.DesiredBodyMessage(101, []byte(body), events.PublishOptions{Publisher: "billing"})
	if err != nil {
		t.Fatal(err)
	}
	if priv != nil {
		if err := events.SignMessage(&m, priv, keyID, signedAt); err != nil {
			t.Fatal(err)
		}
	}
	return projector.Event{Seq: seq, Subject: events.StoredSubject(events.KindDesired, "pve", 101, 16), Header: m.Header,
		Data: m.Data, Time: journalAt}
}

// In signed mode, unsigned, forged, altered, stale and replayed desired
// events are rejected with the reason; a signed one is accepted and says
// who signed it. Replay protection survives a checkpoint.
func TestSignedDesired(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	_, mallory, _ := ed25519.GenerateKey(rand.Reader)
	auth := &projector.Auth{Keys: map[string]ed25519.PublicKey{"ci": pub}, Require: true}
	at := time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)
	p := projector.New("pve")
	p.Auth = auth
	fold := func(ev projector.Event) *projector.View {
		p.Apply(ev)
		return p.Views[101]
	}
	good := signedEv(t, 1, `{"vmid":101,"cores":2}`, priv, "ci", at, at.Add(time.Second))
	if v := fold(good); v.Rejected != nil || v.DesiredSeq != 1 || v.SignedBy != "ci" || v.Publisher != "billing" {
		t.Fatalf("signed event not accepted: %+v", v)
	}
	altered := signedEv(t, 5, `{"vmid":101,"cores":2}`, priv, "ci", at, at)
	altered.Data = []byte(`{"vmid":101,"cores":64}`)
	replayed := good
	replayed.Seq, replayed.Time = 9, at.Add(2*time.Second)
	cases := []struct {
		ev   projector.Event
		says string
	}{
		{signedEv(t, 3, `{"vmid":101,"cores":3}`, nil, "", at, at), "unsigned"},
		{signedEv(t, 4, `{"vmid":101,"cores":3}`, mallory, "ci", at, at), "does not verify"},
		{altered, "does not verify"},
		{signedEv(t, 6, `{"vmid":101,"cores":3}`, mallory, "mallory", at, at), "unknown key"},
		{signedEv(t, 7, `{"vmid":101,"cores":3}`, priv, "ci", at.Add(-time.Hour), at), "window"},
		{signedEv(t, 8, `{"vmid":101,"cores":3}`, priv, "ci", at.Add(time.Hour), at), "window"},
		{replayed, "replayed"},
	}
	for _, c := range cases {
		v := fold(c.ev)
		if v.Rejected == nil || v.Rejected.Seq != c.ev.Seq || !strings.Contains(v.Rejected.Reason, c.says) {
			t.Errorf("#%d: rejection %+v, want %q", c.ev.Seq, v.Rejected, c.says)
		}
		if v.DesiredSeq != 1 {
			t.Fatalf("#%d replaced the desired state", c.ev.Seq)
		}
	}
	// A checkpoint keeps the signatures seen: the replay is refused after
	// a restore too.
	raw, err := json.Marshal(p.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	var snap projector.Snapshot
	if err := json.Unmarshal(raw, &snap); err != nil {
		t.Fatal(err)
	}
	r, err := projector.Restore(&snap, "pve")
	if err != nil {
		t.Fatal(err)
	}
	r.Auth = auth
	again := good
	again.Seq, again.Time = 10, at.Add(3*time.Second)
	r.Apply(again)
	if v := r.Views[101]; v.Rejected == nil || !strings.Contains(v.Rejected.Reason, "replayed") {
		t.Fatalf("replay after restore: %+v", v.Rejected)
	}
	// A new signed event is accepted.
	r.Apply(signedEv(t, 11, `{"vmid":101,"cores":4}`, priv, "ci", at.Add(4*time.Second), at.Add(4*time.Second)))
	if v := r.Views[101]; v.Rejected != nil || v.DesiredSeq != 11 {
		t.Fatalf("new signed event: %+v", v)
	}
}

// Without Require, unsigned events are accepted, but a signed one must
// still verify.
func TestSignedOptional(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	_, mallory, _ := ed25519.GenerateKey(rand.Reader)
	at := time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)
	p := projector.New("pve")
	p.Auth = &projector.Auth{Keys: map[string]ed25519.PublicKey{"ci": pub}}
	p.Apply(signedEv(t, 1, `{"vmid":101,"cores":2}`, nil, "", at, at))
	if v := p.Views[101]; v.Rejected != nil || v.DesiredSeq != 1 || v.SignedBy != "" {
		t.Fatalf("unsigned: %+v", v)
	}
	p.Apply(signedEv(t, 2, `{"vmid":101,"cores":3}`, mallory, "ci", at, at))
	if v := p.Views[101]; v.Rejected == nil || v.DesiredSeq != 1 {
		t.Fatalf("forged accepted: %+v", v)
	}
	_ = priv
}
