package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/internal/pve"
)

// errProxmoxStart is a start-up failure of the Proxmox check: the process
// exits rather than run with credentials or a certificate that cannot work.
var errProxmoxStart = errors.New("start-up check: Proxmox refused")

// checkProxmox asks Proxmox for its inventory once before the roles start.
// Rejected credentials and an untrusted certificate fail the start with
// the fix, unless --wait-for-proxmox (then the roles start, /readyz says
// why it is not ready, and the observer keeps trying). Proxmox not
// answering is warned about: the observer retries, guests show blocked.
func (f *roleFlags) checkProxmox(ctx context.Context, px *pve.Client, log zerolog.Logger) error {
	timeout := f.pveTimeout
	if timeout <= 0 {
		timeout = pve.DefaultTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := px.Inventory(cctx)
	if err == nil {
		log.Debug().Str("url", f.pve.URL).Msg("Proxmox answers and accepts the credentials")
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var msg string
	switch {
	case trustError(err):
		msg = fmt.Sprintf("Proxmox at %s presents a certificate converge does not trust (%v): pin it with --pve-fingerprint%s or give the CA that signed it with --pve-ca FILE (or %s / %s)",
			f.pve.URL, err, presentedFingerprint(ctx, f.pve.URL), envName("pve-fingerprint"), envName("pve-ca"))
	case pve.Classify(err) == pve.ClassUnauthorized:
		msg = fmt.Sprintf("Proxmox at %s refuses converge's credentials (token %q): %v; check --pve-token-id and --pve-token-secret (or %s / %s), and that the token exists, is not expired, and has the privileges README.md lists (\"Pointing converge at a real Proxmox\")",
			f.pve.URL, f.pve.TokenID, err, envName("pve-token-id"), envName("pve-token-secret"))
	default:
		log.Warn().Err(err).Str("url", f.pve.URL).Msg("Proxmox does not answer at start: starting anyway; guests are blocked until it does")
		return nil
	}
	if f.waitForProxmox {
		log.Error().Str("url", f.pve.URL).Msg(msg + "; starting anyway (--wait-for-proxmox): /readyz answers 503 until Proxmox accepts converge")
		return nil
	}
	return fmt.Errorf("%w: %s; or start anyway and keep retrying with --wait-for-proxmox", errProxmoxStart, msg)
}

// trustError reports a TLS verification failure, the fingerprint pin's
// included.
func trustError(err error) bool { return pve.IsTrustError(err) }

// presentedFingerprint is " AA:BB:…" (the SHA-256 of the certificate the
// server presents), for the message; "" if it cannot be read. Check it
// against the node's (pvenode cert info) before pinning it.
func presentedFingerprint(ctx context.Context, rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "https" {
		return ""
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "8006")
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // only reads the certificate, to show its fingerprint
	conn, err := d.DialContext(dctx, "tcp", host)
	if err != nil {
		return ""
	}
	defer conn.Close()
	certs := conn.(*tls.Conn).ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return ""
	}
	sum := sha256.Sum256(certs[0].Raw)
	parts := make([]string, len(sum))
	for i, b := range sum {
		parts[i] = fmt.Sprintf("%02X", b)
	}
	return " " + strings.Join(parts, ":") + " (the certificate it presents now: compare it with `pvenode cert info` on the node first)"
}
