package projector

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/converge-pve/converge/events"
)

// DefaultSignatureWindow is how far a signed desired event's signing
// time may be from its journal time, and how long its signature is
// remembered against replays.
const DefaultSignatureWindow = 5 * time.Minute

// Auth is how a projector checks the signatures of desired events
// (docs/signing.md). With an Auth, a signed event is accepted only if a
// trusted key signed exactly its subject, publisher and body, within the
// window of its journal time, and its signature was not seen before;
// with Require, an unsigned one is rejected too. Without one, signature
// headers are not looked at.
type Auth struct {
	Keys    map[string]ed25519.PublicKey
	Require bool
	Window  time.Duration // default DefaultSignatureWindow
}

// Digest identifies the signing settings (trusted keys, Require, the
// window): two Auths with the same digest judge every desired event
// alike. A snapshot records it, and [Restore] refuses one folded under
// other settings: a fold continued under new settings would keep what the
// old ones accepted (docs/signing.md). "" for nil: no signature check.
func (a *Auth) Digest() string {
	if a == nil {
		return ""
	}
	h := sha256.New()
	fmt.Fprintf(h, "converge-signing-v1\nrequire %t\nwindow %d\n", a.Require, a.window())
	for _, id := range slices.Sorted(maps.Keys(a.Keys)) {
		fmt.Fprintf(h, "key %q %x\n", id, []byte(a.Keys[id]))
	}
	return hex.EncodeToString(h.Sum(nil))
}

func (a *Auth) window() time.Duration {
	if a.Window > 0 {
		return a.Window
	}
	return DefaultSignatureWindow
}

// checkSignature says why the desired event ev of guest v is refused
// ("" when it is not), and who signed it.
func (p *Projector) checkSignature(v *View, ev Event) (why, signedBy string) {
	if p.Auth == nil {
		return "", ""
	}
	subject := events.Subject(events.KindDesired, v.Cluster, v.VMID) // the published form the publisher signed
	sig, err := events.VerifySignature(subject, ev.Header, ev.Data, p.Auth.Keys)
	switch {
	case errors.Is(err, events.ErrUnsigned) && !p.Auth.Require:
		return "", ""
	case errors.Is(err, events.ErrUnsigned):
		return "unsigned: this cluster requires signed desired events (--require-signed)", ""
	case err != nil:
		return "signature refused: " + err.Error(), ""
	}
	at, w := streamTime(ev, sig.SignedAt), p.Auth.window()
	if d := at.Sub(sig.SignedAt); d > w || d < -w {
		return fmt.Sprintf("signature refused: signed at %s, %s from its journal time (window %s)",
			sig.SignedAt.Format(time.RFC3339), d.Round(time.Second), w), ""
	}
	if _, seen := v.Signatures[sig.Digest]; seen {
		return "signature refused: replayed (this signed event was already journalled)", ""
	}
	// A new map, never the old one changed: snapshots share views' maps
	// (View.Clone). What fell out of the window is forgotten: a replay of
	// it is refused by the window check above.
	next := make(map[string]time.Time, len(v.Signatures)+1)
	for d, t := range v.Signatures {
		if at.Sub(t) <= w {
			next[d] = t
		}
	}
	next[sig.Digest] = sig.SignedAt
	v.Signatures = next
	return "", sig.KeyID
}
