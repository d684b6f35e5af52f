package api_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/api"
)

// Issue 18: the API answered anyone. A plain HTML form (enctype
// text/plain) posted desired state from the operator's browser; a foreign
// Host (DNS rebinding) could read the inventory. Every /v1 call now needs
// a bearer token of the right scope, a JSON body, the server's own origin
// and a host that is not a stranger's DNS name.
func TestGuardRefuses(t *testing.T) {
	f := newFixture(t)
	body := []byte(`{"vmid":101,"power":"stopped"}`)
	cases := []struct {
		name, method, path string
		hdr                []string
		code               int
		says               string
	}{
		{"no token", "GET", "/v1/guests", []string{"Authorization", ""}, 401, "bearer token is required"},
		{"unknown token", "GET", "/v1/guests", []string{"Authorization", "Bearer not-a-token-at-all"}, 401, "unknown bearer token"},
		{"basic auth", "GET", "/v1/guests", []string{"Authorization", "Basic YWRtaW46YWRtaW4="}, 401, "bearer token is required"},
		{"no token on a write", "POST", "/v1/desired/101", []string{"Authorization", ""}, 401, "bearer token"},
		{"read token writes", "POST", "/v1/desired/101", []string{"Authorization", "Bearer " + viewerToken}, 403, "may only read"},
		{"html form text/plain", "POST", "/v1/desired/101", []string{"Content-Type", "text/plain"}, 415, "application/json"},
		{"html form urlencoded", "POST", "/v1/desired/101", []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, "application/json"},
		{"no content type", "POST", "/v1/desired/101", []string{"Content-Type", ""}, 415, "application/json"},
		{"foreign origin", "POST", "/v1/desired/101", []string{"Origin", "https://evil.example"}, 403, "cross-origin"},
		{"foreign origin read", "GET", "/v1/guests", []string{"Origin", "http://evil.example"}, 403, "cross-origin"},
		{"dns rebinding host", "GET", "/v1/guests", []string{"Host", "evil.example:8080"}, 421, "not this server"},
		{"dns rebinding host write", "POST", "/v1/desired/101", []string{"Host", "rebind.evil.example"}, 421, "not this server"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := f.msgs(t)
			r := f.do(t, c.method, c.path, body, c.hdr...)
			if r.code != c.code || !strings.Contains(string(r.body), c.says) {
				t.Fatalf("status %d %s, want %d saying %q", r.code, r.body, c.code, c.says)
			}
			if c.code == 401 && r.hdr.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
			if after := f.msgs(t); after != before {
				t.Fatalf("a refused request published %d events", after-before)
			}
		})
	}
	// What is allowed: a read token reads; the server's own origin, IP
	// literals and localhost as Host; /healthz, /readyz, /metrics open.
	for _, hdr := range [][]string{
		{"Authorization", "Bearer " + viewerToken},
		{"Origin", "http://127.0.0.1:8080"},
		// Behind a TLS-terminating proxy the page's origin is https
		// (found by review: every console write was refused there).
		{"Origin", "https://127.0.0.1:8080"},
		{"Host", "localhost:8080"},
		{"Host", "[::1]:8080"},
		{"Host", "192.0.2.7"},
	} {
		if r := f.do(t, "GET", "/v1/guests", nil, hdr...); r.code != 200 {
			t.Errorf("%v: %d %s", hdr, r.code, r.body)
		}
	}
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		if r := f.do(t, "GET", p, nil, "Authorization", "", "Host", "evil.example"); r.code != 200 {
			t.Errorf("%s: %d", p, r.code)
		}
	}
}

// Without tokens /v1 is closed, not open.
func TestNoTokensClosed(t *testing.T) {
	f := newFixture(t)
	f.server.Guard = api.Guard{}
	f.h = f.server.Handler()
	if r := f.do(t, "GET", "/v1/guests", nil); r.code != 401 || !strings.Contains(string(r.body), "/v1 is closed") {
		t.Fatalf("%d %s", r.code, r.body)
	}
	if r := f.do(t, "GET", "/healthz", nil); r.code != 200 {
		t.Fatalf("/healthz: %d", r.code)
	}
}

func TestParseTokens(t *testing.T) {
	sum := sha256.Sum256([]byte("hashed-token-0123456789"))
	good := "tokens:\n  - {name: ci, scope: write, sha256: " + hex.EncodeToString(sum[:]) + "}\n  - {name: dash, scope: read, token: dashboard-0123456789}\n"
	if _, err := api.ParseTokens("t", []byte(good)); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct{ body, says string }{
		{"tokens: []", "no tokens"},
		{"tokens:\n  - {name: a, scope: admin, token: 0123456789abcdefgh}", "scope must be read or write"},
		{"tokens:\n  - {name: a, scope: read, token: short}", "shorter than"},
		{"tokens:\n  - {name: a, scope: read}", "exactly one of token and sha256"},
		{"tokens:\n  - {name: a, scope: read, sha256: abc}", "64 hex digits"},
		{"tokens:\n  - {name: a b, scope: read, token: 0123456789abcdefgh}", "without blanks"},
		{"tokens:\n  - {name: a, scope: read, token: 0123456789abcdefgh}\n  - {name: a, scope: read, token: 0123456789abcdefgz}", "given twice"},
		{"tokens:\n  - {name: a, scope: read, token: 0123456789abcdefgh, extra: 1}", "unknown field"},
	} {
		if _, err := api.ParseTokens("t", []byte(bad.body)); err == nil || !strings.Contains(err.Error(), bad.says) {
			t.Errorf("%q: %v, want %q", bad.body, err, bad.says)
		} else if strings.Contains(err.Error(), "0123456789abcdefg") {
			t.Errorf("error shows a token: %v", err)
		}
	}
}

// A hashed token authenticates as its name.
func TestHashedTokenAndSignHook(t *testing.T) {
	f := newFixture(t)
	sum := sha256.Sum256([]byte("hashed-token-0123456789"))
	tokens, err := api.ParseTokens("t", []byte("tokens:\n  - {name: ci, scope: write, sha256: "+hex.EncodeToString(sum[:])+"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	f.server.Guard.Tokens = tokens
	var signed []string
	f.server.Sign = func(m *events.Message) error {
		signed = append(signed, m.Header.Get(events.HeaderPublisher))
		m.Header.Set("Converge-Test-Signed", "yes")
		return nil
	}
	f.h = f.server.Handler()
	r := f.do(t, "POST", "/v1/desired/101", []byte(`{"vmid":101}`), "Authorization", "Bearer hashed-token-0123456789")
	if r.code != 202 {
		t.Fatalf("%d %s", r.code, r.body)
	}
	got := decodeJSON[accepted](t, r)
	m, err := f.stream.GetMsg(f.ctx, got.Seq)
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Get(events.HeaderPublisher) != "token:ci" || m.Header.Get("Converge-Test-Signed") != "yes" || len(signed) != 1 || signed[0] != "token:ci" {
		t.Fatalf("headers %v, signed %v", m.Header, signed)
	}
}

// A client trickling its body is cut off by the read timeout; more slow
// clients than the connection cap never hold more than the cap, and all
// are cut off in turn (the server is not exhausted).
func TestSlowClientsCutOff(t *testing.T) {
	lim := api.DefaultLimits()
	lim.ReadHeaderTimeout, lim.ReadTimeout, lim.MaxConns = 300*time.Millisecond, 300*time.Millisecond, 2
	var mu sync.Mutex
	open, most := 0, 0
	srv := lim.Server(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusRequestTimeout)
		}
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Counted at the limited listener itself: a connection counts from
	// its Accept until its Close begins, before the cap's slot is freed
	// (http.Server's ConnState reports a close after the slot is free, so
	// a loaded machine saw the next connection's StateNew first).
	counted := &countingListener{Listener: lim.Listener(ln), onAccept: func() {
		mu.Lock()
		defer mu.Unlock()
		open++
		most = max(most, open)
	}, onClose: func() {
		mu.Lock()
		defer mu.Unlock()
		open--
	}}
	go func() { _ = srv.Serve(counted) }()
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })

	const clients = 5
	done := make(chan error, clients)
	for i := range clients {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		go func() {
			// Headers promise 100 bytes; 10 come, then nothing.
			req := "POST /v1/desired/101 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"vmid\":1"
			if i%2 == 1 {
				req = "GET /v1/guests HTTP/1.1\r\nHost: 127.0." // slow headers
			}
			if _, err := c.Write([]byte(req)); err != nil {
				done <- err
				return
			}
			// Generous outer bound: only a server that never cuts it off fails.
			_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
			_, err := io.ReadAll(bufio.NewReader(c))
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				done <- errors.New("the server never cut the slow client off")
				return
			}
			done <- nil
		}()
	}
	for range clients {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if most > lim.MaxConns {
		t.Fatalf("%d connections open at once, cap %d", most, lim.MaxConns)
	}
}

// countingListener tells each Accept and each connection's first Close.
type countingListener struct {
	net.Listener
	onAccept, onClose func()
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.onAccept()
	return &countedConn{Conn: c, onClose: l.onClose}, nil
}

type countedConn struct {
	net.Conn
	once    sync.Once
	onClose func()
}

func (c *countedConn) Close() error {
	c.once.Do(c.onClose) // before the cap's slot is freed
	return c.Conn.Close()
}
