package events

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Headers of a signed desired event (docs/signing.md).
const (
	HeaderSignature = "Converge-Signature" // base64 (standard, padded) ed25519 signature
	HeaderKeyID     = "Converge-Key-Id"    // which trusted key signed
	HeaderSignedAt  = "Converge-Signed-At" // RFC 3339 UTC; converge writes milliseconds
)

// signDomain starts the signed bytes, so that a signature over a desired
// event can never pass for one over anything else.
const signDomain = "converge-desired-v1"

// SignedBytes are the bytes a desired event's signature covers: the
// domain tag, the published subject (pve.desired.<cluster>.<vmid>), the key
// id, the signing time, the Converge-Publisher header and the exact body,
// each of the first five followed by a newline:
//
//	converge-desired-v1\n<subject>\n<key id>\n<signed at>\n<publisher>\n<body>
//
// None of the first five may contain a newline.
func SignedBytes(subject, keyID, signedAt, publisher string, body []byte) ([]byte, error) {
	for _, f := range []string{subject, keyID, signedAt, publisher} {
		if strings.ContainsAny(f, "\r\n") {
			return nil, errors.New("events: a signed field contains a newline")
		}
	}
	var b bytes.Buffer
	for _, f := range []string{signDomain, subject, keyID, signedAt, publisher} {
		b.WriteString(f)
		b.WriteByte('\n')
	}
	b.Write(body)
	return b.Bytes(), nil
}

// signedAtLayout is the signing time as converge writes it: RFC 3339 UTC
// with milliseconds. ed25519 signatures are deterministic, so the same
// body signed twice within one whole second (a rollback to the revision
// just replaced) would be the same signature, refused as a replay.
// Verification accepts any RFC 3339 time, whole seconds too.
const signedAtLayout = "2006-01-02T15:04:05.000Z07:00"

// SignMessage signs a desired message with key, named keyID, at now: it
// sets the three signature headers. The message's subject, publisher
// header and body must not change afterwards.
func SignMessage(m *Message, key ed25519.PrivateKey, keyID string, now time.Time) error {
	if keyID == "" || strings.ContainsAny(keyID, " \t\r\n") {
		return fmt.Errorf("events: key id %q: want a name without blanks", keyID)
	}
	if m.Header == nil {
		m.Header = Header{}
	}
	at := now.UTC().Truncate(time.Millisecond).Format(signedAtLayout)
	msg, err := SignedBytes(m.Subject, keyID, at, m.Header.Get(HeaderPublisher), m.Data)
	if err != nil {
		return err
	}
	m.Header.Set(HeaderKeyID, keyID)
	m.Header.Set(HeaderSignedAt, at)
	m.Header.Set(HeaderSignature, base64.StdEncoding.EncodeToString(ed25519.Sign(key, msg)))
	return nil
}

// Signature is a verified signature.
type Signature struct {
	KeyID    string
	SignedAt time.Time
	// Digest identifies the signature (its bytes), for replay detection.
	Digest string
}

// Errors of VerifySignature.
var (
	ErrUnsigned   = errors.New("unsigned")
	ErrUnknownKey = errors.New("signed with an unknown key")
	ErrBadSig     = errors.New("signature does not verify (forged, or the body or headers altered)")
)

// Signed reports whether h carries any signature header.
func Signed(h Header) bool {
	return h.Get(HeaderSignature) != "" || h.Get(HeaderKeyID) != "" || h.Get(HeaderSignedAt) != ""
}

// VerifySignature checks the signature of a desired event published on
// subject (its published form) with headers h and body, against keys.
func VerifySignature(subject string, h Header, body []byte, keys map[string]ed25519.PublicKey) (Signature, error) {
	if !Signed(h) {
		return Signature{}, ErrUnsigned
	}
	keyID, at := h.Get(HeaderKeyID), h.Get(HeaderSignedAt)
	pub, ok := keys[keyID]
	if !ok {
		return Signature{}, fmt.Errorf("%w %q", ErrUnknownKey, keyID)
	}
	signedAt, err := time.Parse(time.RFC3339, at)
	if err != nil {
		return Signature{}, fmt.Errorf("%w: %s %q is not an RFC 3339 time", ErrBadSig, HeaderSignedAt, at)
	}
	sig, err := base64.StdEncoding.DecodeString(h.Get(HeaderSignature))
	if err != nil || len(sig) != ed25519.SignatureSize {
		return Signature{}, fmt.Errorf("%w: %s is not a base64 ed25519 signature", ErrBadSig, HeaderSignature)
	}
	msg, err := SignedBytes(subject, keyID, at, h.Get(HeaderPublisher), body)
	if err != nil || !ed25519.Verify(pub, msg, sig) {
		return Signature{}, ErrBadSig
	}
	return Signature{KeyID: keyID, SignedAt: signedAt, Digest: base64.RawStdEncoding.EncodeToString(sig[:24])}, nil
}

// ParsePrivateKey reads an ed25519 private key in PKCS#8 PEM (what
// `converge keygen`, openssl genpkey -algorithm ed25519 and Python's
// cryptography write).
func ParsePrivateKey(pemBytes []byte) (ed25519.PrivateKey, error) {
	b, _ := pem.Decode(pemBytes)
	if b == nil {
		return nil, errors.New("events: not a PEM key")
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("events: private key: %w", err)
	}
	ek, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("events: private key is a %T, want ed25519", k)
	}
	return ek, nil
}

// ParsePublicKey reads an ed25519 public key in PKIX PEM.
func ParsePublicKey(pemBytes []byte) (ed25519.PublicKey, error) {
	b, _ := pem.Decode(pemBytes)
	if b == nil {
		return nil, errors.New("events: not a PEM key")
	}
	k, err := x509.ParsePKIXPublicKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("events: public key: %w", err)
	}
	ek, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("events: public key is a %T, want ed25519", k)
	}
	return ek, nil
}

// MarshalKeys writes a key pair as PKCS#8 and PKIX PEM.
func MarshalKeys(priv ed25519.PrivateKey) (privPEM, pubPEM []byte, err error) {
	p8, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, nil, err
	}
	pk, err := x509.MarshalPKIXPublicKey(priv.Public())
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p8}), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pk}), nil
}
