package pve

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

const (
	// DefaultConfigTaskWait is Config.ConfigTaskWait's default: Proxmox
	// counts background_delay in whole seconds from a whole-second clock,
	// so a short wait may end almost at once.
	DefaultConfigTaskWait = 5 * time.Second
	// DefaultTimeout bounds one HTTP request. go-proxmox has no default at
	// all, so a hung node would hang the caller forever. Task waiting is not
	// bounded by it (it polls).
	DefaultTimeout = 30 * time.Second

	apiPath = "/api2/json"

	// ticketRefresh is when a login ticket is renewed. PVE tickets are valid
	// for 2 hours; renewing after 1 leaves slack for clock skew.
	ticketRefresh = time.Hour

	// maxErrorBody bounds how much of an error body is read.
	maxErrorBody = 64 << 10
)

// Config says how to reach and authenticate to a Proxmox VE cluster.
// Start from [DefaultConfig]: a field left zero is refused by
// [Config.Validate], not read as its default.
type Config struct {
	// URL of the API, e.g. https://pve1:8006/api2/json; /api2/json is
	// appended when missing. Plain http is accepted, see PlainHTTP.
	URL string
	// TokenID ("user@realm!tokenid") and TokenSecret authenticate with an
	// API token (preferred: no login round trip, no ticket expiry).
	TokenID, TokenSecret string
	// Username ("user@realm") and Password log in for a ticket instead.
	Username, Password string
	// Fingerprint pins the server certificate by the SHA-256 of its leaf
	// certificate (hex, colons optional), as shown by PVE for self-signed
	// node certificates. Without CAFile, chain verification is replaced by
	// the pin; with CAFile, both must pass.
	Fingerprint string
	// CAFile is a PEM bundle of CAs to trust instead of the system pool.
	CAFile string
	// Insecure skips certificate verification. Callers log a loud warning.
	Insecure bool
	// Timeout bounds each HTTP request.
	Timeout time.Duration
	// ConfigTaskWait is how long Proxmox is asked to wait for a QEMU config
	// write's task before answering (background_delay, whole seconds,
	// 1–30): a write that finishes within it answers without a task, which
	// saves the task poll, and the executor a "started" journal entry; a
	// slower one answers with its task, as without it. A failed task then
	// fails the request with the task's exit status. 0 never waits (every
	// QEMU config write answers with its task). It stays below Timeout:
	// Proxmox holds the request that long. LXC config writes are
	// synchronous anyway.
	ConfigTaskWait time.Duration
	// NodeCalls is the most requests this client has in flight to one
	// node (DefaultNodeCalls: what the node's API workers serve at once);
	// the others wait their turn here rather than in the node's queue. The
	// cluster-wide paths have slots of their own. 0: no limit.
	NodeCalls int
	// Logger receives debug logs of calls and tasks. Secrets are never logged.
	Logger zerolog.Logger
}

// DefaultConfig returns the defaults above; URL and the credentials are
// the caller's.
func DefaultConfig() Config {
	return Config{Timeout: DefaultTimeout, ConfigTaskWait: DefaultConfigTaskWait, NodeCalls: DefaultNodeCalls}
}

// ConfigTaskWaitWithin is the default ConfigTaskWait for a Timeout:
// DefaultConfigTaskWait, or the whole seconds below a shorter Timeout (0,
// no wait, below 2s).
func ConfigTaskWaitWithin(timeout time.Duration) time.Duration {
	w := min(DefaultConfigTaskWait, (timeout - time.Nanosecond).Truncate(time.Second))
	if w < time.Second {
		return 0
	}
	return w
}

// Validate refuses a Config that cannot work, naming the field; New calls
// it.
func (c Config) Validate() error {
	_, err := c.checked()
	return err
}

// checked validates c and returns it with its URL and Fingerprint in
// their canonical forms.
func (c Config) checked() (Config, error) {
	const p = "pve.Config."
	if c.URL == "" {
		return c, errors.New(p + "URL: must be set, e.g. https://pve1:8006/api2/json")
	}
	u, err := url.Parse(c.URL)
	if err != nil {
		return c, fmt.Errorf(p+"URL: %q: %w", c.URL, err)
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return c, fmt.Errorf(p+"URL: %q must start with https:// (or http://)", c.URL)
	}
	if u.Host == "" {
		return c, fmt.Errorf(p+"URL: %q has no host", c.URL)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return c, fmt.Errorf(p+"URL: %q must not carry a query, fragment or user info", c.URL)
	}
	path := strings.TrimRight(u.Path, "/")
	switch {
	case strings.HasSuffix(path, apiPath):
	case strings.HasSuffix(path, "/api2"):
		path += "/json"
	default:
		path += apiPath
	}
	u.Path, u.RawPath = path, ""
	c.URL = u.String()

	token := c.TokenID != "" || c.TokenSecret != ""
	login := c.Username != "" || c.Password != ""
	switch {
	case token && login:
		return c, errors.New(p + "TokenID: set either TokenID/TokenSecret or Username/Password, not both")
	case !token && !login:
		return c, errors.New(p + "TokenID: no credentials: set TokenID and TokenSecret (or Username and Password)")
	case token && (c.TokenID == "" || c.TokenSecret == ""):
		return c, errors.New(p + "TokenSecret: TokenID and TokenSecret must both be set")
	case token && !validTokenID(c.TokenID):
		return c, fmt.Errorf(p+"TokenID: %q must look like user@realm!tokenid", c.TokenID)
	case login && (c.Username == "" || c.Password == ""):
		return c, errors.New(p + "Username: Username and Password must both be set")
	case login && !strings.Contains(c.Username, "@"):
		return c, fmt.Errorf(p+"Username: %q must include the realm, e.g. %s@pam", c.Username, c.Username)
	}

	if c.Fingerprint != "" {
		fp, err := normaliseFingerprint(c.Fingerprint)
		if err != nil {
			return c, fmt.Errorf(p+"Fingerprint: %w", err)
		}
		c.Fingerprint = fp
	}
	tlsOpts := c.Fingerprint != "" || c.CAFile != ""
	switch {
	case c.Insecure && tlsOpts:
		return c, errors.New(p + "Insecure: contradicts Fingerprint/CAFile: use one")
	case u.Scheme == "http" && (tlsOpts || c.Insecure):
		return c, fmt.Errorf(p+"URL: TLS options given but %q is plain http", c.URL)
	}
	if c.CAFile != "" {
		if _, err := os.Stat(c.CAFile); err != nil {
			return c, fmt.Errorf(p+"CAFile: %w", err)
		}
	}

	switch {
	case c.NodeCalls < 0:
		return c, fmt.Errorf(p+"NodeCalls: must be >= 0 (0: no limit), got %d", c.NodeCalls)
	case c.Timeout <= 0:
		return c, fmt.Errorf(p+"Timeout: must be > 0, got %s", c.Timeout)
	case c.ConfigTaskWait < 0 || c.ConfigTaskWait%time.Second != 0 || c.ConfigTaskWait > 30*time.Second:
		return c, fmt.Errorf(p+"ConfigTaskWait: must be whole seconds from 1s to 30s (or 0: never wait), got %s", c.ConfigTaskWait)
	case c.ConfigTaskWait > 0 && c.ConfigTaskWait >= c.Timeout:
		return c, fmt.Errorf(p+"ConfigTaskWait: must be shorter than Timeout (%s): Proxmox holds the request that long, got %s", c.Timeout, c.ConfigTaskWait)
	}
	return c, nil
}

// PlainHTTP reports whether c.URL is plain http: the API token or the
// password, and every ticket, cross the network in clear, readable and
// replayable by anyone on the path. It is allowed (the simulator speaks
// http); callers log a loud warning, and Loopback tells them whether the
// traffic stays on this host.
func (c Config) PlainHTTP() bool {
	u, err := url.Parse(c.URL)
	return err == nil && strings.EqualFold(u.Scheme, "http")
}

// Loopback reports whether c.URL's host is a loopback address or
// "localhost".
func (c Config) Loopback() bool {
	u, err := url.Parse(c.URL)
	if err != nil {
		return false
	}
	h := u.Hostname()
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

func validTokenID(id string) bool {
	at := strings.Index(id, "@")
	bang := strings.LastIndex(id, "!")
	return at > 0 && bang > at+1 && bang < len(id)-1
}

// normaliseFingerprint accepts "AB:CD:…" or "abcd…" and returns lower-case hex.
func normaliseFingerprint(s string) (string, error) {
	h := strings.ToLower(strings.NewReplacer(":", "", " ", "").Replace(strings.TrimSpace(s)))
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != sha256.Size {
		return "", fmt.Errorf("%q is not a SHA-256 fingerprint (64 hex digits, colons optional)", s)
	}
	return h, nil
}

// String redacts secrets so a Config can be printed or logged.
func (c Config) String() string {
	return fmt.Sprintf("pve.Config{URL:%q TokenID:%q TokenSecret:%s Username:%q Password:%s Fingerprint:%q CAFile:%q Insecure:%t Timeout:%s ConfigTaskWait:%s}",
		c.URL, c.TokenID, redact(c.TokenSecret), c.Username, redact(c.Password), c.Fingerprint, c.CAFile, c.Insecure, c.Timeout, c.ConfigTaskWait)
}

// GoString redacts secrets for %#v too.
func (c Config) GoString() string { return c.String() }

func redact(s string) string {
	if s == "" {
		return `""`
	}
	return "<redacted>"
}
