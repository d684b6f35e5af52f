package events_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
)

func keypair(t *testing.T) (ed25519.PublicKey, ed25519.PrivateKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return pub, priv
}

func TestSignAndVerify(t *testing.T) {
	pub, priv := keypair(t)
	other, _ := keypair(t)
	keys := map[string]ed25519.PublicKey{"ci": pub}
	now := time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)
	on := events.PowerRunning
	sign := func() events.Message {
		m, err := events.DesiredMessage(&events.Desired{VMID: 101, Power: &on}, events.PublishOptions{Publisher: "billing"})
		if err != nil {
			t.Fatal(err)
		}
		if err := events.SignMessage(&m, priv, "ci", now); err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := sign()
	sig, err := events.VerifySignature(m.Subject, m.Header, m.Data, keys)
	if err != nil || sig.KeyID != "ci" || !sig.SignedAt.Equal(now) || sig.Digest == "" {
		t.Fatalf("%+v %v", sig, err)
	}
	cases := []struct {
		name string
		mod  func(m *events.Message) (string, map[string]ed25519.PublicKey)
		want error
	}{
		{"altered body", func(m *events.Message) (string, map[string]ed25519.PublicKey) {
			m.Data = []byte(`{"vmid":101,"power":"stopped"}`)
			return m.Subject, keys
		}, events.ErrBadSig},
		{"altered publisher", func(m *events.Message) (string, map[string]ed25519.PublicKey) {
			m.Header.Set(events.HeaderPublisher, "admin")
			return m.Subject, keys
		}, events.ErrBadSig},
		{"altered time", func(m *events.Message) (string, map[string]ed25519.PublicKey) {
			m.Header.Set(events.HeaderSignedAt, now.Add(time.Hour).Format(time.RFC3339))
			return m.Subject, keys
		}, events.ErrBadSig},
		{"another guest's subject", func(m *events.Message) (string, map[string]ed25519.PublicKey) {
			return events.Subject(events.KindDesired, "pve", 102), keys
		}, events.ErrBadSig},
		{"forged with another key under a trusted id", func(m *events.Message) (string, map[string]ed25519.PublicKey) {
			return m.Subject, map[string]ed25519.PublicKey{"ci": other}
		}, events.ErrBadSig},
		{"unknown key", func(m *events.Message) (string, map[string]ed25519.PublicKey) {
			return m.Subject, map[string]ed25519.PublicKey{"ops": pub}
		}, events.ErrUnknownKey},
		{"unsigned", func(m *events.Message) (string, map[string]ed25519.PublicKey) {
			for _, h := range []string{events.HeaderSignature, events.HeaderKeyID, events.HeaderSignedAt} {
				delete(m.Header, h)
			}
			return m.Subject, keys
		}, events.ErrUnsigned},
		{"garbage signature", func(m *events.Message) (string, map[string]ed25519.PublicKey) {
			m.Header.Set(events.HeaderSignature, "!!")
			return m.Subject, keys
		}, events.ErrBadSig},
	}
	for _, c := range cases {
		m := sign()
		subject, ks := c.mod(&m)
		if _, err := events.VerifySignature(subject, m.Header, m.Data, ks); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

func TestKeysRoundTrip(t *testing.T) {
	_, priv := keypair(t)
	privPEM, pubPEM, err := events.MarshalKeys(priv)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := events.ParsePrivateKey(privPEM)
	if err != nil || !p2.Equal(priv) {
		t.Fatalf("private: %v", err)
	}
	pub, err := events.ParsePublicKey(pubPEM)
	if err != nil || !pub.Equal(priv.Public()) {
		t.Fatalf("public: %v", err)
	}
	if _, err := events.ParsePublicKey(privPEM); err == nil {
		t.Fatal("a private key read as a public one")
	}
}

// The same body signed twice within one second (a rollback to the revision
// just replaced) gets two signatures: converge signs with milliseconds,
// and ed25519 is deterministic. A signature with whole seconds, as other
// publishers may write, still verifies.
func TestSignedTwiceWithinASecond(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]ed25519.PublicKey{"ci": pub}
	on := events.PowerRunning
	sign := func(at time.Time) events.Signature {
		t.Helper()
		m, err := events.DesiredMessage(&events.Desired{VMID: 101, Power: &on}, events.PublishOptions{Publisher: "ops"})
		if err != nil {
			t.Fatal(err)
		}
		if err := events.SignMessage(&m, priv, "ci", at); err != nil {
			t.Fatal(err)
		}
		if got := m.Header.Get(events.HeaderSignedAt); got != at.UTC().Truncate(time.Millisecond).Format("2006-01-02T15:04:05.000Z") {
			t.Fatalf("signed at %q", got)
		}
		sig, err := events.VerifySignature(m.Subject, m.Header, m.Data, keys)
		if err != nil {
			t.Fatal(err)
		}
		return sig
	}
	at := time.Date(2026, 11, 24, 8, 0, 0, 250e6, time.UTC)
	if a, b := sign(at), sign(at.Add(400*time.Millisecond)); a.Digest == b.Digest {
		t.Fatal("two signings 400 ms apart in one second share a signature: the second is refused as a replay")
	}
	m, err := events.DesiredMessage(&events.Desired{VMID: 101, Power: &on}, events.PublishOptions{Publisher: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	whole := "2026-11-24T08:00:00Z"
	msg, err := events.SignedBytes(m.Subject, "ci", whole, "ops", m.Data)
	if err != nil {
		t.Fatal(err)
	}
	m.Header.Set(events.HeaderKeyID, "ci")
	m.Header.Set(events.HeaderSignedAt, whole)
	m.Header.Set(events.HeaderSignature, base64.StdEncoding.EncodeToString(ed25519.Sign(priv, msg)))
	if sig, err := events.VerifySignature(m.Subject, m.Header, m.Data, keys); err != nil || !sig.SignedAt.Equal(at.Truncate(time.Second)) {
		t.Fatalf("whole seconds: %+v %v", sig, err)
	}
}
