package projector_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
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
	r, err := projector.Restore(&snap, "pve", auth)
	if err != nil {
		t.Fatal(err)
	}
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

// A snapshot records the signing settings it was folded under, and Restore
// refuses it under others (issue 35, defect 6): a fold continued under new
// settings would keep what the old ones accepted, and differ from a fold
// of the whole journal under the new ones.
func TestRestoreSigningSettings(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	other, _, _ := ed25519.GenerateKey(rand.Reader)
	at := time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)
	keys := func(ks ...ed25519.PublicKey) map[string]ed25519.PublicKey {
		m := map[string]ed25519.PublicKey{}
		for i, k := range ks {
			m[[]string{"ci", "ops"}[i]] = k
		}
		return m
	}
	evs := []projector.Event{
		signedEv(t, 1, `{"vmid":101,"cores":2}`, nil, "", at, at),
		signedEv(t, 2, `{"vmid":101,"cores":3}`, priv, "ci", at, at),
		signedEv(t, 3, `{"vmid":101,"cores":4}`, nil, "", at, at),
	}
	snapshot := func(a *projector.Auth) *projector.Snapshot {
		p := projector.New("pve")
		p.Auth = a
		for _, ev := range evs {
			p.Apply(ev)
		}
		raw, err := json.Marshal(p.Snapshot())
		if err != nil {
			t.Fatal(err)
		}
		var s projector.Snapshot
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatal(err)
		}
		return &s
	}
	required := &projector.Auth{Keys: keys(pub), Require: true}
	cases := []struct {
		name     string
		from, to *projector.Auth
		ok       bool
	}{
		{"off, off", nil, nil, true},
		{"off, then required", nil, required, false},
		{"required, then off", required, nil, false},
		{"same settings, other map", required, &projector.Auth{Keys: keys(pub), Require: true}, true},
		{"default window spelled out", required, &projector.Auth{Keys: keys(pub), Require: true, Window: projector.DefaultSignatureWindow}, true},
		{"require dropped", required, &projector.Auth{Keys: keys(pub)}, false},
		{"key added", required, &projector.Auth{Keys: keys(pub, other), Require: true}, false},
		{"key replaced", required, &projector.Auth{Keys: keys(other), Require: true}, false},
		{"window changed", required, &projector.Auth{Keys: keys(pub), Require: true, Window: time.Hour}, false},
	}
	for _, c := range cases {
		s := snapshot(c.from)
		r, err := projector.Restore(s, "pve", c.to)
		if c.ok != (err == nil) {
			t.Errorf("%s: restore error %v, want ok=%t", c.name, err, c.ok)
			continue
		}
		if err != nil && !errors.Is(err, projector.ErrSigningChanged) {
			t.Errorf("%s: %v, want ErrSigningChanged", c.name, err)
		}
		if err == nil && r.Auth != c.to {
			t.Errorf("%s: restored projector does not judge with the settings given", c.name)
		}
	}
	// Under the new settings, a fold from the start: the unsigned desired
	// states are rejected, the signed one in force.
	s := snapshot(required)
	if v := s.Views[101]; v.DesiredSeq != 2 || v.Rejected == nil || v.Rejected.Seq != 3 || !strings.Contains(v.Rejected.Reason, "unsigned") {
		t.Fatalf("fold under require: desired #%d, rejection %+v", v.DesiredSeq, v.Rejected)
	}
}
