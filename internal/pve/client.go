package pve

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gojson "github.com/goccy/go-json"
	proxmox "github.com/luthermonson/go-proxmox"
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

// Config says how to reach and authenticate to a Proxmox VE cluster. All
// defaults and validation live in Validate.
type Config struct {
	// URL of the API, e.g. https://pve1:8006/api2/json; /api2/json is
	// appended when missing.
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
	// Timeout bounds each HTTP request; 0 means DefaultTimeout.
	Timeout time.Duration
	// ConfigTaskWait is how long Proxmox is asked to wait for a QEMU config
	// write's task before answering (background_delay, whole seconds,
	// 1–30): a write that finishes within it answers without a task, which
	// saves the task poll, and the executor a "started" journal entry; a
	// slower one answers with its task, as without it. A failed task then
	// fails the request with the task's exit status. 0 means
	// DefaultConfigTaskWait; negative never waits (every QEMU config write
	// answers with its task). LXC config writes are synchronous anyway.
	ConfigTaskWait time.Duration
	// Logger receives debug logs of calls and tasks. Secrets are never logged.
	Logger zerolog.Logger
}

// Validate applies defaults to a copy of c and reports the first problem.
func (c Config) Validate() error {
	_, err := c.withDefaults()
	return err
}

// withDefaults is the one place for defaults and validation; New uses its
// result.
func (c Config) withDefaults() (Config, error) {
	const p = "pve.Config."
	if c.URL == "" {
		return c, errors.New(p + "URL must be set, e.g. https://pve1:8006/api2/json")
	}
	u, err := url.Parse(c.URL)
	if err != nil {
		return c, fmt.Errorf(p+"URL %q: %w", c.URL, err)
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return c, fmt.Errorf(p+"URL %q must start with https:// (or http://)", c.URL)
	}
	if u.Host == "" {
		return c, fmt.Errorf(p+"URL %q has no host", c.URL)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return c, fmt.Errorf(p+"URL %q must not carry a query, fragment or user info", c.URL)
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
		return c, errors.New(p + "set either TokenID/TokenSecret or Username/Password, not both")
	case !token && !login:
		return c, errors.New(p + "no credentials: set TokenID and TokenSecret (or Username and Password)")
	case token && (c.TokenID == "" || c.TokenSecret == ""):
		return c, errors.New(p + "TokenID and TokenSecret must both be set")
	case token && !validTokenID(c.TokenID):
		return c, fmt.Errorf(p+"TokenID %q must look like user@realm!tokenid", c.TokenID)
	case login && (c.Username == "" || c.Password == ""):
		return c, errors.New(p + "Username and Password must both be set")
	case login && !strings.Contains(c.Username, "@"):
		return c, fmt.Errorf(p+"Username %q must include the realm, e.g. %s@pam", c.Username, c.Username)
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
		return c, errors.New(p + "Insecure contradicts Fingerprint/CAFile: use one")
	case u.Scheme == "http" && (tlsOpts || c.Insecure):
		return c, fmt.Errorf(p+"TLS options given but URL %q is plain http", c.URL)
	}
	if c.CAFile != "" {
		if _, err := os.Stat(c.CAFile); err != nil {
			return c, fmt.Errorf(p+"CAFile: %w", err)
		}
	}

	switch {
	case c.Timeout < 0:
		return c, fmt.Errorf(p+"Timeout must be >= 0, got %s", c.Timeout)
	case c.Timeout == 0:
		c.Timeout = DefaultTimeout
	}
	switch {
	case c.ConfigTaskWait == 0:
		// The default stays below a short Timeout, or is dropped.
		c.ConfigTaskWait = min(DefaultConfigTaskWait, (c.Timeout - time.Nanosecond).Truncate(time.Second))
		if c.ConfigTaskWait < time.Second {
			c.ConfigTaskWait = -1
		}
	case c.ConfigTaskWait < 0:
		c.ConfigTaskWait = -1
	case c.ConfigTaskWait%time.Second != 0 || c.ConfigTaskWait > 30*time.Second:
		return c, fmt.Errorf(p+"ConfigTaskWait must be whole seconds from 1s to 30s (or negative: never wait), got %s", c.ConfigTaskWait)
	}
	if c.ConfigTaskWait >= c.Timeout {
		return c, fmt.Errorf(p+"ConfigTaskWait (%s) must be shorter than Timeout (%s): Proxmox holds the request that long", c.ConfigTaskWait, c.Timeout)
	}
	return c, nil
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

// Client is converge's handle on one Proxmox VE cluster. It is safe for
// concurrent use.
type Client struct {
	pc      *proxmox.Client
	log     zerolog.Logger
	url     string
	calls   atomic.Int64
	now     func() time.Time
	timeout time.Duration // bounds each call, body included
	// configWait is background_delay in seconds for QEMU config writes,
	// 0 for none.
	configWait int

	// Ticket auth only (nil/unused with API tokens). go-proxmox's own
	// ticket handling reads and writes its session without a lock, so we
	// log in ourselves and attach the ticket in a request interceptor.
	login   *proxmox.Credentials
	loginMu sync.Mutex // serialises logins
	session atomic.Pointer[session]
}

type session struct {
	ticket, csrf string
	obtained     time.Time
}

// New validates cfg and returns a Client. It does no I/O: ticket logins
// happen on the first call.
func New(cfg Config) (*Client, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	hc, err := newHTTPClient(cfg)
	if err != nil {
		return nil, err
	}
	c := &Client{log: cfg.Logger, url: cfg.URL, now: time.Now, timeout: cfg.Timeout, configWait: max(0, int(cfg.ConfigTaskWait/time.Second))}
	opts := []proxmox.Option{
		proxmox.WithHTTPClient(hc),
		proxmox.WithUserAgent("converge"),
		proxmox.WithLogger(pxLogger{cfg.Logger}),
		proxmox.WithRequestInterceptor(c.intercept),
		// Never WithRetry: it re-sends POSTs (start, clone) on 5xx/net errors.
	}
	auth := "ticket"
	if cfg.TokenID != "" {
		auth = "token"
		opts = append(opts, proxmox.WithAPIToken(cfg.TokenID, cfg.TokenSecret))
	} else {
		c.login = &proxmox.Credentials{Username: cfg.Username, Password: cfg.Password}
	}
	c.pc = proxmox.NewClient(cfg.URL, opts...)

	ev := c.log.Debug().Str("url", cfg.URL).Str("auth", auth).Dur("timeout", cfg.Timeout)
	if cfg.TokenID != "" {
		ev = ev.Str("token_id", cfg.TokenID)
	} else {
		ev = ev.Str("user", cfg.Username)
	}
	switch {
	case cfg.Fingerprint != "":
		ev = ev.Str("tls", "pinned")
	case cfg.CAFile != "":
		ev = ev.Str("tls", "ca-file")
	case cfg.Insecure:
		ev = ev.Str("tls", "INSECURE")
	}
	ev.Msg("pve client configured")
	return c, nil
}

// Calls returns the number of HTTP requests sent so far (logins included),
// for "Proxmox calls per observe pass" accounting.
func (c *Client) Calls() int64 { return c.calls.Load() }

// URL returns the normalised API base URL.
func (c *Client) URL() string { return c.url }

func newHTTPClient(cfg Config) (*http.Client, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("pve.Config.CAFile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("pve.Config.CAFile %q holds no PEM certificate", cfg.CAFile)
		}
		tc.RootCAs = pool
	}
	if cfg.Fingerprint != "" {
		want, _ := hex.DecodeString(cfg.Fingerprint) // validated
		// The pin replaces chain verification only when no CA was given.
		tc.InsecureSkipVerify = cfg.CAFile == ""
		// VerifyConnection, unlike VerifyPeerCertificate, also runs on
		// resumed sessions.
		tc.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return &fingerprintMismatchError{}
			}
			got := sha256.Sum256(cs.PeerCertificates[0].Raw)
			if subtle.ConstantTimeCompare(got[:], want) != 1 {
				return &fingerprintMismatchError{got: hex.EncodeToString(got[:])}
			}
			return nil
		}
	}
	if cfg.Insecure {
		tc.InsecureSkipVerify = true
	}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       tc,
		TLSHandshakeTimeout:   10 * time.Second,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   256, // executors run many guests at once; redialling costs more than idling
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
		// HTTP/1.1 only: pveproxy speaks it, and PVE's messages live in the
		// HTTP/1 reason phrase, which HTTP/2 does not have.
		ForceAttemptHTTP2: false,
		TLSNextProto:      map[string]func(string, *tls.Conn) http.RoundTripper{},
	}
	// No http.Client.Timeout: Client bounds each call with a context
	// deadline instead. With a custom RoundTripper, net/http enforces
	// Client.Timeout with a goroutine and a timer per request.
	return &http.Client{Transport: &statusTransport{base: tr}}, nil
}

// fingerprintMismatchError is returned when the pinned fingerprint does not
// match; it classifies as ClassUnauthorized.
type fingerprintMismatchError struct{ got string }

func (e *fingerprintMismatchError) Error() string {
	if e.got == "" {
		return "server presented no certificate to check the pinned fingerprint against"
	}
	return "server certificate fingerprint " + e.got + " does not match the pinned fingerprint"
}

// statusTransport turns every non-2xx answer into a *statusError carrying the
// status code, PVE's reason phrase and the body's message. This deliberately
// bends the RoundTripper rule "a response is not an error": go-proxmox keeps
// only res.Status for 500s, drops the 400 error map's structure, and decodes
// the body of other codes (595, 404, 502 from a proxy) as a success — a
// {"data":null} 595 would otherwise read as "mutation completed
// synchronously".
type statusTransport struct{ base http.RoundTripper }

func (t *statusTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := t.base.RoundTrip(req)
	if err == nil && res.StatusCode >= 200 && res.StatusCode < 300 {
		if sink, ok := req.Context().Value(bodySinkKey{}).(*bodySink); ok {
			// The body goes to Client.do, which decodes it once; go-proxmox,
			// called with no target, reads an empty one.
			sink.body, err = io.ReadAll(res.Body)
			_ = res.Body.Close()
			if err != nil {
				return nil, err
			}
			res.Body = http.NoBody
		}
		return res, nil
	}
	if err != nil {
		return res, err
	}
	defer func() { _ = res.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
	se := &statusError{
		Code:   res.StatusCode,
		Reason: strings.TrimSpace(strings.TrimPrefix(res.Status, strconv.Itoa(res.StatusCode))),
	}
	var env struct {
		Message string                     `json:"message"`
		Errors  map[string]json.RawMessage `json:"errors"`
	}
	if json.Unmarshal(body, &env) == nil {
		se.Body = strings.TrimSpace(env.Message)
		if len(env.Errors) > 0 {
			se.Params = make(map[string]string, len(env.Errors))
			for k, v := range env.Errors {
				var s string
				if json.Unmarshal(v, &s) != nil {
					s = string(v)
				}
				se.Params[k] = s
			}
		}
	} else if len(body) > 0 && len(body) < 512 && !strings.Contains(string(body), "<") {
		se.Body = strings.TrimSpace(string(body)) // short plain-text body, not an HTML error page
	}
	return nil, se
}

func httpStatusText(code int) string {
	if t := http.StatusText(code); t != "" {
		return t
	}
	return "HTTP " + strconv.Itoa(code)
}

// intercept counts requests and attaches the login ticket. It runs inside
// go-proxmox's Req, after its own (token) auth headers.
func (c *Client) intercept(req *http.Request) error {
	c.calls.Add(1)
	if c.login == nil || strings.HasSuffix(req.URL.Path, "/access/ticket") {
		return nil
	}
	if s := c.session.Load(); s != nil {
		req.Header.Set("Cookie", "PVEAuthCookie="+s.ticket)
		req.Header.Set("CSRFPreventionToken", s.csrf)
	}
	return nil
}

// ensureSession logs in when there is no ticket or it is due for renewal.
func (c *Client) ensureSession(ctx context.Context) error {
	if c.login == nil {
		return nil
	}
	if s := c.session.Load(); s != nil && c.now().Sub(s.obtained) < ticketRefresh {
		return nil
	}
	return c.relogin(ctx, c.session.Load())
}

// relogin logs in unless another goroutine replaced stale meanwhile.
func (c *Client) relogin(ctx context.Context, stale *session) error {
	c.loginMu.Lock()
	defer c.loginMu.Unlock()
	if cur := c.session.Load(); cur != stale && cur != nil && c.now().Sub(cur.obtained) < ticketRefresh {
		return nil
	}
	var out struct {
		Ticket string `json:"ticket"`
		CSRF   string `json:"CSRFPreventionToken"`
	}
	// The body holds the password: go-proxmox does not log /access/ticket
	// bodies, and pxLogger drops its debug output anyway.
	lctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	err := c.pc.Post(lctx, "/access/ticket", c.login, &out)
	if err == nil && out.Ticket == "" {
		err = errors.New("login answer carried no ticket")
	}
	if err != nil {
		return wrapError(OpLogin, GuestRef{}, false, err)
	}
	c.session.Store(&session{ticket: out.Ticket, csrf: out.CSRF, obtained: c.now()})
	c.log.Debug().Str("user", c.login.Username).Msg("pve login ticket obtained")
	return nil
}

// do sends one API call and decodes the answer's data into out (a pointer,
// typically *json.RawMessage). Every error it returns is an *Error.
func (c *Client) do(ctx context.Context, op Op, ref GuestRef, method, path string, body any, out *json.RawMessage) error {
	return c.doWith(ctx, op, ref, method, path, body, func(b []byte) (err error) {
		*out, err = envelopeData(b)
		return err
	})
}

// doWith is do with the decoding of a successful answer's whole body left
// to decode (do's is envelopeData).
func (c *Client) doWith(ctx context.Context, op Op, ref GuestRef, method, path string, body any, decode func([]byte) error) error {
	mutation := method != http.MethodGet
	if err := ctx.Err(); err != nil {
		return &Error{Class: ClassTransient, Op: op, Ref: ref, Err: err} // not sent
	}
	if err := c.ensureSession(ctx); err != nil {
		return err
	}
	var data []byte
	if body != nil {
		var err error
		if data, err = json.Marshal(body); err != nil {
			return &Error{Class: ClassTerminal, Op: op, Ref: ref, Err: err}
		}
	}
	before := c.session.Load()
	// go-proxmox decodes a body twice with encoding/json (the envelope,
	// then its data); at 10,000 guests an inventory read spent more CPU
	// there than anywhere else. It is asked for no result, and the body,
	// captured by the transport, is decoded here once.
	sink := &bodySink{}
	rctx, cancel := context.WithTimeout(context.WithValue(ctx, bodySinkKey{}, sink), c.timeout)
	defer cancel()
	err := c.pc.Req(rctx, method, path, data, nil)
	if err != nil && c.login != nil && isStatus(err, http.StatusUnauthorized) {
		// The ticket was rejected (expired, server restarted). PVE answers
		// 401 before running anything, so re-sending after a fresh login
		// cannot apply a mutation twice.
		if lerr := c.relogin(ctx, before); lerr != nil {
			return lerr
		}
		err = c.pc.Req(rctx, method, path, data, nil)
	}
	if err == nil {
		err = decode(sink.body)
	}
	if err != nil {
		c.log.Debug().Str("op", string(op)).Str("method", method).Str("path", path).Err(err).Msg("pve call failed")
	}
	return wrapError(op, ref, mutation, err)
}

// bodySink receives the body of a successful answer (statusTransport).
type bodySink struct{ body []byte }

type bodySinkKey struct{}

// envelopeData returns what go-proxmox would decode from an answer: the
// "data" member of the top-level object (the whole body if it has none),
// nothing for null, and encoding/json's error for a malformed body.
func envelopeData(body []byte) (json.RawMessage, error) {
	var env map[string]json.RawMessage
	// goccy/go-json skips some malformed JSON that encoding/json (and so
	// go-proxmox) refuses: the body is checked with the standard scanner,
	// and any doubt falls back to encoding/json, whose errors Classify
	// knows.
	if !json.Valid(body) || gojson.Unmarshal(body, &env) != nil {
		env = nil
		if err := json.Unmarshal(body, &env); err != nil {
			return nil, err
		}
	}
	d, ok := env["data"]
	if !ok {
		d = body
	}
	if isNull(d) {
		return nil, nil
	}
	return d, nil
}

func isStatus(err error, code int) bool {
	var se *statusError
	return errors.As(err, &se) && se.Code == code
}

// pxLogger adapts go-proxmox's logger. Its debug and info output carries
// request and response bodies, so it is dropped.
type pxLogger struct{ log zerolog.Logger }

func (pxLogger) Debugf(string, ...any) {}
func (pxLogger) Infof(string, ...any)  {}
func (l pxLogger) Warnf(format string, v ...any) {
	l.log.Warn().Str("component", "go-proxmox").Msgf(format, v...)
}
func (l pxLogger) Errorf(format string, v ...any) {
	l.log.Error().Str("component", "go-proxmox").Msgf(format, v...)
}
