package pve

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-json-experiment/json"
	proxmox "github.com/luthermonson/go-proxmox"
	"github.com/rs/zerolog"
)

// Client is converge's handle on one Proxmox VE cluster. It is safe for
// concurrent use.
type Client struct {
	pxOpts  []proxmox.Option // every call's go-proxmox client; see answerReader
	wire    *statusTransport
	log     zerolog.Logger
	url     string
	calls   atomic.Int64
	metrics *requestMetrics
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
	cfg, err := cfg.checked()
	if err != nil {
		return nil, err
	}
	m := newRequestMetrics()
	wire, err := newWire(cfg, m)
	if err != nil {
		return nil, err
	}
	c := &Client{wire: wire, metrics: m, log: cfg.Logger, url: cfg.URL, now: time.Now, timeout: cfg.Timeout, configWait: max(0, int(cfg.ConfigTaskWait/time.Second))}
	opts := []proxmox.Option{
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
	c.pxOpts = opts

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
	// The body holds the password: go-proxmox does not log /access/ticket
	// bodies, and pxLogger drops its debug output anyway.
	var out loginAnswer
	err := c.send(ctx, OpLogin, GuestRef{}, http.MethodPost, "/access/ticket", c.login, func(b []byte) (err error) {
		out, err = decodeAnswer[loginAnswer](b)
		return err
	})
	if err == nil && out.Ticket == "" {
		err = &Error{Class: ClassUnknown, Op: OpLogin, Message: "login answer carried no ticket"}
	}
	if err != nil {
		return err
	}
	c.session.Store(&session{ticket: out.Ticket, csrf: out.CSRF, obtained: c.now()})
	c.log.Debug().Str("user", c.login.Username).Msg("pve login ticket obtained")
	return nil
}

// loginAnswer is the data of POST /access/ticket.
type loginAnswer struct {
	Ticket string `json:"ticket"`
	CSRF   string `json:"CSRFPreventionToken"`
}

// do sends one API call and hands a successful answer's whole body to
// decode (nil: discardAnswer). Every error it returns is an
// *Error; an answer decode cannot read is ClassUnknown, and for a
// mutation Indeterminate (Proxmox accepted the call).
func (c *Client) do(ctx context.Context, op Op, ref GuestRef, method, path string, body any, decode func([]byte) error) error {
	if err := ctx.Err(); err != nil {
		return &Error{Class: ClassTransient, Op: op, Ref: ref, Err: err} // not sent
	}
	if err := c.ensureSession(ctx); err != nil {
		return err
	}
	return c.send(ctx, op, ref, method, path, body, decode)
}

// send is do without the session: logins use it.
func (c *Client) send(ctx context.Context, op Op, ref GuestRef, method, path string, body any, decode func([]byte) error) error {
	mutation := method != http.MethodGet && op != OpLogin // a login changes nothing
	var data []byte
	if body != nil {
		var err error
		if data, err = json.Marshal(body, writeOpts); err != nil {
			return &Error{Class: ClassTerminal, Op: op, Ref: ref, Err: err}
		}
	}
	before := c.session.Load()
	answer, sent, err := c.exchangeInSlot(ctx, method, path, data, mutation)
	if !sent {
		return &Error{Class: ClassTransient, Op: op, Ref: ref, Err: err} // not sent
	}
	if err != nil && op != OpLogin && c.login != nil && isStatus(err, http.StatusUnauthorized) {
		// The ticket was rejected (expired, server restarted). PVE answers
		// 401 before running anything, so re-sending after a fresh login
		// cannot apply a mutation twice.
		if lerr := c.relogin(ctx, before); lerr != nil {
			return lerr
		}
		if answer, sent, err = c.exchangeInSlot(ctx, method, path, data, mutation); !sent {
			return &Error{Class: ClassTransient, Op: op, Ref: ref, Err: err} // not sent
		}
	}
	if decode == nil {
		decode = discardAnswer
	}
	if err == nil {
		if derr := decode(answer); derr != nil {
			err = &Error{Class: ClassUnknown, Op: op, Ref: ref, Message: derr.Error(), Err: derr, Indeterminate: mutation}
		}
	}
	if err != nil {
		c.log.Debug().Str("op", string(op)).Str("method", method).Str("path", path).Err(err).Msg("pve call failed")
	}
	return wrapError(op, ref, mutation, err)
}

// exchangeInSlot is exchange within one of the node's slots
// (Config.NodeCalls): the wait for the slot is bounded by ctx alone, the
// call by the request timeout from then on, as the wait in the node's own
// queue is not a call Proxmox is running. A mutation is sent only if ctx's
// gate (WithGate), asked once the slot is granted, still allows it. sent
// is false when nothing reached Proxmox (the wait ended, the gate closed).
func (c *Client) exchangeInSlot(ctx context.Context, method, path string, data []byte, mutation bool) (answer []byte, sent bool, err error) {
	release, err := c.wire.slots.acquire(ctx, method, path)
	if err != nil {
		return nil, false, err
	}
	defer release()
	if g := gateOf(ctx); mutation && g != nil && !g() {
		return nil, false, ErrGateClosed
	}
	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	answer, err = c.exchange(rctx, method, path, data)
	return answer, true, err
}

// exchange sends one request through a go-proxmox client of its own, whose
// transport keeps the answer's body (answerReader).
func (c *Client) exchange(ctx context.Context, method, path string, data []byte) ([]byte, error) {
	a := &answerReader{wire: c.wire}
	// No http.Client.Timeout: each call is bounded by a context deadline
	// instead. With a custom RoundTripper, net/http enforces
	// Client.Timeout with a goroutine and a timer per request.
	opts := append(c.pxOpts[:len(c.pxOpts):len(c.pxOpts)], proxmox.WithHTTPClient(&http.Client{Transport: a}))
	if err := proxmox.NewClient(c.url, opts...).Req(ctx, method, path, data, nil); err != nil {
		return nil, err
	}
	return a.body, nil
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
