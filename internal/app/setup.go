package app

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

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/api"
	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/projector"
)

// Setup is what a process prepares from its operator's settings before
// its roles start, alike for `converge up` and the role commands: the HTTP
// API's tokens, the trust in signed desired state, the signing of what /v1
// accepts, and the Proxmox client with its start-up check.
type Setup struct {
	// HTTPTokens is the HTTP API's tokens file (--http-tokens);
	// without it, DefaultTokens, if set, is one created on first use (up's,
	// under its data directory). Neither is read when HTTP is off or
	// HTTPAuth.Guard.NoAuth.
	HTTPTokens, DefaultTokens string
	// Trust checks desired events' signatures for the planner and the
	// executors (signed mode); nil: unsigned.
	Trust *projector.Auth
	// Sign, if set, signs desired state posted over HTTP.
	Sign func(*events.Message) error
	// Proxmox is how to reach Proxmox VE, used when the observer or an
	// executor runs.
	Proxmox pve.Config
	// BuiltinSim: Proxmox is up's own simulator, whose plain http on
	// loopback is not warned about.
	BuiltinSim bool
	// WaitForProxmox starts even if Proxmox refuses the credentials or
	// its certificate is not trusted (--wait-for-proxmox).
	WaitForProxmox bool
}

// ErrSetting marks an error of Setup.Apply that a Proxmox setting causes
// (a CA file without a certificate, say): nothing was started. The
// error's text is the setting's own ("pve.Config.CAFile: …"), so that the
// command line can name the flag.
var ErrSetting = errors.New("bad setting")

// settingError is an error that a setting causes: errors.Is(err,
// ErrSetting) holds, and its text is the cause's alone.
type settingError struct{ err error }

func (e settingError) Error() string        { return e.err.Error() }
func (e settingError) Unwrap() error        { return e.err }
func (e settingError) Is(target error) bool { return target == ErrSetting }

// Apply prepares cfg: the Proxmox client (when the observer or an
// executor runs), checked once with [CheckProxmox]; the HTTP API's tokens;
// the planner's and executors' trust; the signing of /v1's desired state.
func (s Setup) Apply(ctx context.Context, cfg *Config) error {
	log := cfg.Logger
	if cfg.Roles.Observer || cfg.Roles.Executor {
		px, err := s.Client(log)
		if err != nil {
			return err
		}
		if err := CheckProxmox(ctx, px, s.Proxmox, s.WaitForProxmox, log); err != nil {
			return err
		}
		cfg.Proxmox = px
	}
	if err := s.tokens(&cfg.HTTPAuth, cfg.HTTP, log); err != nil {
		return err
	}
	cfg.Planner.Planner.Auth, cfg.Executor.Auth = s.Trust, s.Trust
	if a := s.Trust; a != nil {
		ids := make([]string, 0, len(a.Keys))
		for id := range a.Keys {
			ids = append(ids, id)
		}
		log.Info().Strs("trusted_keys", ids).Bool("require_signed", a.Require).Dur("window", a.Window).Msg("signed desired events")
	}
	cfg.HTTPSign = s.Sign
	return nil
}

// Client is the Proxmox client, after loud warnings about a connection
// anyone on the path could read.
func (s Setup) Client(log zerolog.Logger) (*pve.Client, error) {
	c := s.Proxmox
	if c.Insecure {
		log.Warn().Str("url", c.URL).Msg("TLS VERIFICATION OF PROXMOX IS OFF (--pve-insecure): anyone on the path can impersonate Proxmox and read the API token; use --pve-fingerprint or --pve-ca")
	}
	if c.PlainHTTP() && !(s.BuiltinSim && c.Loopback()) {
		log.Warn().Str("url", c.URL).Msg("PROXMOX OVER PLAIN HTTP (--pve-url http://…): the API token or password, and every ticket, cross the network in clear, readable and replayable by anyone on the path; use https:// with --pve-fingerprint or --pve-ca")
	}
	c.Logger = log
	px, err := pve.New(c)
	if err != nil {
		return nil, settingError{err}
	}
	return px, nil
}

// tokens loads the HTTP API's bearer tokens into h.
func (s Setup) tokens(h *HTTPAuth, addr string, log zerolog.Logger) error {
	if addr == "" || h.Guard.NoAuth {
		return nil
	}
	var err error
	switch {
	case s.HTTPTokens != "":
		h.Guard.Tokens, err = api.LoadTokens(s.HTTPTokens)
	case s.DefaultTokens != "":
		var created bool
		h.Guard.Tokens, created, err = api.LoadOrCreateTokens(s.DefaultTokens)
		if err == nil {
			log.Info().Str("file", s.DefaultTokens).Bool("created", created).
				Msg("HTTP API tokens (the admin token may write; curl -H \"Authorization: Bearer $TOKEN\")")
		}
	}
	return err
}

// ErrProxmoxStart is a start-up failure of CheckProxmox: the process exits
// rather than run with credentials or a certificate that cannot work.
var ErrProxmoxStart = errors.New("start-up check: Proxmox refused")

// CheckProxmox asks Proxmox for its inventory once before the roles
// start. Rejected credentials and an untrusted certificate fail the start
// with the fix, unless waitFor (then the roles start, /readyz says why it
// is not ready, and the observer keeps trying). Proxmox not answering is
// warned about: the observer retries, guests show blocked.
func CheckProxmox(ctx context.Context, px *pve.Client, c pve.Config, waitFor bool, log zerolog.Logger) error {
	cctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	_, err := px.Inventory(cctx)
	if err == nil {
		log.Debug().Str("url", c.URL).Msg("Proxmox answers and accepts the credentials")
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var msg string
	switch {
	case pve.IsTrustError(err):
		msg = fmt.Sprintf("Proxmox at %s presents a certificate converge does not trust (%v): pin it with --pve-fingerprint%s or give the CA that signed it with --pve-ca FILE (or CONVERGE_PVE_FINGERPRINT / CONVERGE_PVE_CA)",
			c.URL, err, presentedFingerprint(ctx, c.URL))
	case pve.Classify(err) == pve.ClassUnauthorized:
		msg = fmt.Sprintf("Proxmox at %s refuses converge's credentials (token %q): %v; check --pve-token-id and --pve-token-secret (or CONVERGE_PVE_TOKEN_ID / CONVERGE_PVE_TOKEN_SECRET), and that the token exists, is not expired, and has the privileges README.md lists (\"Pointing converge at a real Proxmox\")",
			c.URL, c.TokenID, err)
	default:
		log.Warn().Err(err).Str("url", c.URL).Msg("Proxmox does not answer at start: starting anyway; guests are blocked until it does")
		return nil
	}
	if waitFor {
		log.Error().Str("url", c.URL).Msg(msg + "; starting anyway (--wait-for-proxmox): /readyz answers 503 until Proxmox accepts converge")
		return nil
	}
	return fmt.Errorf("%w: %s; or start anyway and keep retrying with --wait-for-proxmox", ErrProxmoxStart, msg)
}

// presentedTimeout bounds reading the certificate Proxmox presents, for
// the message.
const presentedTimeout = 5 * time.Second

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
	dctx, cancel := context.WithTimeout(ctx, presentedTimeout)
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
