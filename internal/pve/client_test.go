package pve

import (
	"crypto/sha256"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	token := func(u string) Config {
		c := DefaultConfig()
		c.URL, c.TokenID, c.TokenSecret = u, "root@pam!converge", "s"
		return c
	}
	login := func(u, user, password string) Config {
		c := DefaultConfig()
		c.URL, c.Username, c.Password = u, user, password
		return c
	}
	fp := strings.Repeat("AB:", 31) + "AB"
	for _, tc := range []struct {
		name    string
		cfg     Config
		wantURL string
		wantErr string
	}{
		{"host only", token("https://pve:8006"), "https://pve:8006/api2/json", ""},
		{"trailing slash", token("https://pve:8006/"), "https://pve:8006/api2/json", ""},
		{"full path", token("https://pve:8006/api2/json/"), "https://pve:8006/api2/json", ""},
		{"api2 only", token("https://pve:8006/api2"), "https://pve:8006/api2/json", ""},
		{"behind a prefix", token("https://proxy/pve"), "https://proxy/pve/api2/json", ""},
		{"plain http", token("http://127.0.0.1:8006"), "http://127.0.0.1:8006/api2/json", ""},
		{"ticket login", login("https://pve", "root@pam", "p"), "https://pve/api2/json", ""},
		{"no URL", Config{TokenID: "root@pam!x", TokenSecret: "s"}, "", "URL: must be set"},
		{"bad scheme", token("ftp://pve"), "", "must start with https://"},
		{"no host", token("https://"), "", "has no host"},
		{"query", token("https://pve?x=1"), "", "must not carry a query"},
		{"no credentials", Config{URL: "https://pve"}, "", "no credentials"},
		{"both", Config{URL: "https://pve", TokenID: "root@pam!x", TokenSecret: "s", Username: "root@pam", Password: "p"}, "", "not both"},
		{"token without secret", Config{URL: "https://pve", TokenID: "root@pam!x"}, "", "must both be set"},
		{"token id form", Config{URL: "https://pve", TokenID: "root@pam", TokenSecret: "s"}, "", "user@realm!tokenid"},
		{"password without user", login("https://pve", "", "p"), "", "must both be set"},
		{"user without realm", login("https://pve", "root", "p"), "", "root@pam"},
		{"bad fingerprint", func() Config { c := token("https://pve"); c.Fingerprint = "abc"; return c }(), "", "Fingerprint"},
		{"insecure and pin", func() Config { c := token("https://pve"); c.Fingerprint = fp; c.Insecure = true; return c }(), "", "Insecure: contradicts"},
		{"pin on http", func() Config { c := token("http://pve"); c.Fingerprint = fp; return c }(), "", "plain http"},
		{"missing CA file", func() Config { c := token("https://pve"); c.CAFile = filepath.Join(dir, "nope"); return c }(), "", "CAFile"},
		{"CA file", func() Config { c := token("https://pve"); c.CAFile = caFile; return c }(), "https://pve/api2/json", ""},
		{"negative timeout", func() Config { c := token("https://pve"); c.Timeout = -time.Second; return c }(), "", "Timeout"},
		{"no timeout", func() Config { c := token("https://pve"); c.Timeout = 0; return c }(), "", "Timeout: must be > 0"},
		{"negative config wait", func() Config { c := token("https://pve"); c.ConfigTaskWait = -time.Second; return c }(), "", "ConfigTaskWait"},
		{"config wait not whole seconds", func() Config { c := token("https://pve"); c.ConfigTaskWait = 1500 * time.Millisecond; return c }(), "", "ConfigTaskWait"},
		{"config wait over 30s", func() Config { c := token("https://pve"); c.ConfigTaskWait = 31 * time.Second; return c }(), "", "ConfigTaskWait"},
		{"config wait not below timeout", func() Config {
			c := token("https://pve")
			c.ConfigTaskWait, c.Timeout = 10*time.Second, 10*time.Second
			return c
		}(), "", "ConfigTaskWait"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.cfg.checked()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want containing %q", err, tc.wantErr)
				}
				if !strings.HasPrefix(err.Error(), "pve.Config.") {
					t.Errorf("error %q does not name the field", err)
				}
				if _, err := New(tc.cfg); err == nil {
					t.Error("New accepted what Validate refused")
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if got.URL != tc.wantURL {
				t.Errorf("URL = %q, want %q", got.URL, tc.wantURL)
			}
			if got.Timeout != DefaultTimeout {
				t.Errorf("Timeout = %s, want default", got.Timeout)
			}
		})
	}
	// background_delay: 5 s by default, in whole seconds below a short
	// Timeout, none for a Timeout of 1s or less; each valid with it.
	for _, tc := range []struct{ timeout, want time.Duration }{
		{DefaultTimeout, DefaultConfigTaskWait}, {3 * time.Second, 2 * time.Second}, {1500 * time.Millisecond, time.Second},
		{time.Second, 0}, {40 * time.Second, DefaultConfigTaskWait},
	} {
		c := token("https://pve")
		c.Timeout, c.ConfigTaskWait = tc.timeout, ConfigTaskWaitWithin(tc.timeout)
		if err := c.Validate(); err != nil || c.ConfigTaskWait != tc.want {
			t.Errorf("Timeout %s: ConfigTaskWait %s (%v), want %s", tc.timeout, c.ConfigTaskWait, err, tc.want)
		}
	}
	c := token("https://pve")
	c.Fingerprint = fp
	got, err := c.checked()
	if err != nil || got.Fingerprint != strings.Repeat("ab", 32) {
		t.Errorf("fingerprint normalised to %q (%v)", got.Fingerprint, err)
	}
}

func TestConfigRedactsSecrets(t *testing.T) {
	cfg := Config{URL: "https://pve", TokenID: "root@pam!x", TokenSecret: "tok-s3cret-value", Password: "hunter2-pass"}
	for _, s := range []string{fmt.Sprint(cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg), cfg.String()} {
		if strings.Contains(s, "tok-s3cret-value") || strings.Contains(s, "hunter2-pass") {
			t.Errorf("secret printed: %s", s)
		}
		if !strings.Contains(s, "root@pam!x") {
			t.Errorf("token id should be shown: %s", s)
		}
	}
}

func TestNewDoesNoIO(t *testing.T) {
	cfg := DefaultConfig()
	cfg.URL, cfg.Username, cfg.Password = "https://192.0.2.1:8006", "root@pam", "p"
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c.Calls() != 0 || c.URL() != "https://192.0.2.1:8006/api2/json" {
		t.Errorf("calls %d url %q", c.Calls(), c.URL())
	}
	if _, err := New(Config{}); err == nil {
		t.Error("New accepted an empty config")
	}
}

func TestTLS(t *testing.T) {
	var proto atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proto.Store(int32(r.ProtoMajor))
		writeData(w, `[]`)
	}))
	srv.EnableHTTP2 = true // the client must still speak HTTP/1.1
	srv.StartTLS()
	t.Cleanup(srv.Close)

	sum := sha256.Sum256(srv.Certificate().Raw)
	var colons []string
	for _, b := range sum {
		colons = append(colons, fmt.Sprintf("%02X", b))
	}
	pin := strings.Join(colons, ":")
	wrongPin := strings.Repeat("00", 32)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name  string
		mod   func(*Config)
		class Class // -1: success
	}{
		{"pinned fingerprint", func(c *Config) { c.Fingerprint = pin }, -1},
		{"wrong fingerprint", func(c *Config) { c.Fingerprint = wrongPin }, ClassUnauthorized},
		{"CA file", func(c *Config) { c.CAFile = caFile }, -1},
		{"CA file and pin", func(c *Config) { c.CAFile = caFile; c.Fingerprint = pin }, -1},
		{"CA file and wrong pin", func(c *Config) { c.CAFile = caFile; c.Fingerprint = wrongPin }, ClassUnauthorized},
		{"untrusted", func(*Config) {}, ClassUnauthorized},
		{"insecure", func(c *Config) { c.Insecure = true }, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proto.Store(0)
			cfg := DefaultConfig()
			cfg.URL, cfg.TokenID, cfg.TokenSecret = srv.URL, "root@pam!converge", "s"
			tc.mod(&cfg)
			c, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Inventory(bg)
			if tc.class < 0 {
				if err != nil {
					t.Fatalf("Inventory: %v", err)
				}
				if proto.Load() != 1 {
					t.Errorf("server saw HTTP/%d, want HTTP/1.1", proto.Load())
				}
				return
			}
			if Classify(err) != tc.class {
				t.Errorf("class = %v (%v), want %v", Classify(err), err, tc.class)
			}
		})
	}
}

func TestRequestTimeout(t *testing.T) {
	f := newFake(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	hang := func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}
	f.on(http.MethodGet, "/nodes/pve/qemu/100/status/current", hang)
	f.on(http.MethodPost, "/nodes/pve/qemu/100/status/start", hang)
	c := f.clientWith(t, func(c *Config) { c.Timeout, c.ConfigTaskWait = 20*time.Millisecond, 0 })
	_, err := c.GuestStatus(bg, vm100)
	if e := asError(t, err); e.Class != ClassTransient || e.Indeterminate {
		t.Errorf("read timeout: %+v", e)
	}
	_, err = c.Start(bg, vm100)
	if e := asError(t, err); e.Class != ClassTransient || !e.Indeterminate {
		t.Errorf("mutation timeout must be indeterminate: %+v", e)
	}
}

// ticketServer is a fake PVE with ticket auth: logins hand out numbered
// tickets; only the current ticket is accepted; writes need the CSRF token.
type ticketServer struct {
	*fakePVE
	mu      sync.Mutex
	current string
	logins  int
	starts  int // start requests that were authorised and executed
}

func newTicketServer(t *testing.T) *ticketServer {
	ts := &ticketServer{fakePVE: newFake(t)}
	ts.on(http.MethodPost, "/access/ticket", func(w http.ResponseWriter, r *http.Request) {
		body := ts.last().Body
		if body["username"] != "root@pam" || body["password"] != "hunter2-pass" {
			pveError(w, 401, "authentication failure")
			return
		}
		ts.mu.Lock()
		ts.logins++
		ts.current = fmt.Sprintf("PVE:root@pam:6791F9E%d::secret-ticket-signature", ts.logins)
		ticket := ts.current
		ts.mu.Unlock()
		writeData(w, fmt.Sprintf(`{"username":"root@pam","ticket":%q,"CSRFPreventionToken":"6791F9E1:csrf-token","clustername":"lab","cap":{}}`, ticket))
	})
	authed := func(next http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			ts.mu.Lock()
			ok := ts.current != "" && r.Header.Get("Cookie") == "PVEAuthCookie="+ts.current
			ts.mu.Unlock()
			if !ok {
				pveError(w, 401, "No ticket")
				return
			}
			if r.Method != http.MethodGet && r.Header.Get("CSRFPreventionToken") != "6791F9E1:csrf-token" {
				pveError(w, 401, "Permission denied - invalid csrf token")
				return
			}
			next(w, r)
		}
	}
	ts.on(http.MethodGet, "/cluster/resources", authed(func(w http.ResponseWriter, _ *http.Request) { writeData(w, clusterResources) }))
	ts.on(http.MethodPost, "/nodes/pve/qemu/100/status/start", authed(func(w http.ResponseWriter, _ *http.Request) {
		ts.mu.Lock()
		ts.starts++
		ts.mu.Unlock()
		writeData(w, `"`+upid("qmstart", "100")+`"`)
	}))
	return ts
}

func (ts *ticketServer) invalidate() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.current = "revoked"
}

func (ts *ticketServer) counts() (logins, starts int) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.logins, ts.starts
}

func TestTicketAuth(t *testing.T) {
	ts := newTicketServer(t)
	var logs logBuffer
	c := ts.clientWith(t, func(cfg *Config) {
		cfg.TokenID, cfg.TokenSecret = "", "" // a ticket login instead
		cfg.Username, cfg.Password, cfg.Logger = "root@pam", "hunter2-pass", debugLogger(&logs)
	})

	// Concurrent first calls share one login.
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Inventory(bg); err != nil {
				t.Errorf("Inventory: %v", err)
			}
		}()
	}
	wg.Wait()
	if logins, _ := ts.counts(); logins != 1 {
		t.Errorf("logins = %d, want 1", logins)
	}
	if c.Calls() != 9 {
		t.Errorf("Calls = %d, want 9 (1 login + 8 reads)", c.Calls())
	}

	// A rejected ticket: one fresh login, the write re-sent once, executed once.
	ts.invalidate()
	task, err := c.Start(bg, vm100)
	if err != nil || task.IsZero() {
		t.Fatalf("Start after ticket loss: %+v, %v", task, err)
	}
	if logins, starts := ts.counts(); logins != 2 || starts != 1 {
		t.Errorf("logins %d starts %d, want 2 and 1", logins, starts)
	}

	// An old ticket is renewed before use, without a 401 first.
	before := len(ts.requests())
	c.now = func() time.Time { return time.Now().Add(ticketRefresh + time.Minute) }
	if _, err := c.Inventory(bg); err != nil {
		t.Fatal(err)
	}
	if logins, _ := ts.counts(); logins != 3 {
		t.Errorf("logins = %d, want 3", logins)
	}
	for _, r := range ts.requests()[before:] {
		if r.Path == "/cluster/resources" && r.Header.Get("Cookie") != "PVEAuthCookie=PVE:root@pam:6791F9E3::secret-ticket-signature" {
			t.Errorf("read sent with stale cookie %q", r.Header.Get("Cookie"))
		}
	}

	for _, secret := range []string{"hunter2-pass", "secret-ticket-signature", "csrf-token"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("log contains secret %q:\n%s", secret, logs.String())
		}
	}
	if !strings.Contains(logs.String(), "pve login ticket obtained") {
		t.Errorf("expected debug logs, got:\n%s", logs.String())
	}
}

func TestTicketAuthWrongPassword(t *testing.T) {
	ts := newTicketServer(t)
	c := ts.clientWith(t, func(cfg *Config) {
		cfg.TokenID, cfg.TokenSecret = "", "" // a ticket login instead
		cfg.Username, cfg.Password = "root@pam", "wrong"
	})
	_, err := c.Inventory(bg)
	e := asError(t, err)
	if e.Class != ClassUnauthorized || e.Op != OpLogin || e.Status != 401 {
		t.Errorf("error = %+v", e)
	}
	if ts.count(http.MethodGet, "/cluster/resources") != 0 {
		t.Error("read sent without a ticket")
	}
}

func TestTokenSecretNeverLogged(t *testing.T) {
	f := newFake(t)
	f.onData(http.MethodGet, "/cluster/resources", clusterResources)
	f.onError(http.MethodPost, "/nodes/pve/qemu/100/status/start", 500, "VM is locked (backup)")
	f.onData(http.MethodPost, "/nodes/pve/qemu/100/status/stop", `"`+upid("qmstop", "100")+`"`)
	f.task(upid("qmstop", "100"), 1, "unexpected status", "TASK ERROR: unexpected status")
	var logs logBuffer
	c := f.clientWith(t, func(cfg *Config) { cfg.Logger = debugLogger(&logs) })
	_, _ = c.Inventory(bg)
	_, _ = c.Start(bg, vm100)
	task, _ := c.Stop(bg, vm100)
	_, _ = c.WaitTask(bg, task, fastWait)
	_, _ = c.GuestConfig(bg, vm100) // 501 from the fake
	out := logs.String()
	if out == "" {
		t.Fatal("no debug logs captured")
	}
	if strings.Contains(out, "tok-s3cret-value") {
		t.Errorf("token secret logged:\n%s", out)
	}
}

func TestUnauthorizedToken(t *testing.T) {
	f := newFake(t)
	f.onError(http.MethodGet, "/cluster/resources", 401, "invalid token value!")
	_, err := f.client(t).Inventory(bg)
	e := asError(t, err)
	if e.Class != ClassUnauthorized || e.Status != 401 || e.Message != "invalid token value!" {
		t.Errorf("error = %+v", e)
	}
	if n := f.count(http.MethodGet, "/cluster/resources"); n != 1 {
		t.Errorf("token auth retried a 401: %d requests", n)
	}
}
