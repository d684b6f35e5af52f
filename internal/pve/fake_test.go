package pve

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/rs/zerolog"
)

// fakePVE is a minimal scripted Proxmox API: routes answer with PVE's wire
// shapes, errors carry their message in the reason phrase (written by hand
// through http.Hijacker, as pveproxy does), and every request is recorded.
type fakePVE struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	routes map[string]http.HandlerFunc // "METHOD /path" (decoded, no /api2/json)
	reqs   []recorded
}

type recorded struct {
	Method     string
	RequestURI string // raw, as sent
	Path       string // decoded, without /api2/json
	Query      url.Values
	Body       map[string]string // each member's Value.Text()
	Header     http.Header
}

const testUPIDPrefix = "UPID:pve:0001A2B3:00C0FFEE:6791F9E1:"

func newFake(t *testing.T) *fakePVE {
	t.Helper()
	f := &fakePVE{t: t, routes: map[string]http.HandlerFunc{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakePVE) serve(w http.ResponseWriter, r *http.Request) {
	body := map[string]string{}
	if b, _ := io.ReadAll(r.Body); len(b) > 0 {
		var m map[string]Value
		if err := json.Unmarshal(b, &m); err != nil {
			f.t.Errorf("fake: %s %s: body is not JSON: %v", r.Method, r.URL, err)
		}
		for k, v := range m {
			body[k] = v.Text()
		}
	}
	path := strings.TrimPrefix(r.URL.Path, "/api2/json")
	f.mu.Lock()
	f.reqs = append(f.reqs, recorded{
		Method: r.Method, RequestURI: r.RequestURI, Path: path,
		Query: r.URL.Query(), Body: body, Header: r.Header.Clone(),
	})
	h := f.routes[r.Method+" "+path]
	f.mu.Unlock()
	if h == nil {
		pveError(w, http.StatusNotImplemented, fmt.Sprintf("Method '%s %s' not implemented", r.Method, path))
		return
	}
	// Handlers read the decoded body from the recorded request.
	h(w, r)
}

func (f *fakePVE) on(method, path string, h http.HandlerFunc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.routes[method+" "+path] = h
}

// onData answers with {"data": <raw JSON>}.
func (f *fakePVE) onData(method, path, raw string) {
	f.on(method, path, func(w http.ResponseWriter, _ *http.Request) { writeData(w, raw) })
}

// onError answers with a PVE error in the reason phrase.
func (f *fakePVE) onError(method, path string, code int, msg string) {
	f.on(method, path, func(w http.ResponseWriter, _ *http.Request) { pveError(w, code, msg) })
}

func (f *fakePVE) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

func (f *fakePVE) last() recorded {
	r := f.requests()
	if len(r) == 0 {
		f.t.Fatal("fake: no request recorded")
	}
	return r[len(r)-1]
}

func (f *fakePVE) count(method, path string) int {
	n := 0
	for _, r := range f.requests() {
		if r.Method == method && r.Path == path {
			n++
		}
	}
	return n
}

// client returns a token-authenticated client for the fake.
func (f *fakePVE) client(t *testing.T) *Client {
	t.Helper()
	return f.clientWith(t, func(*Config) {})
}

func (f *fakePVE) clientWith(t *testing.T, mod func(*Config)) *Client {
	t.Helper()
	cfg := DefaultConfig()
	cfg.URL, cfg.TokenID, cfg.TokenSecret = f.srv.URL, "root@pam!converge", "tok-s3cret-value"
	mod(&cfg)
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

// task scripts a task: `running` polls answer "running", then "stopped" with
// exit; log lines are served from …/log.
type fakeTask struct {
	mu      sync.Mutex
	polls   int
	running int
	exit    string
	echo    string // upid to echo; default the real one
}

func (f *fakePVE) task(upid string, running int, exit string, log ...string) *fakeTask {
	ft := &fakeTask{running: running, exit: exit}
	node := strings.Split(upid, ":")[1]
	base := "/nodes/" + node + "/tasks/" + upid
	f.on(http.MethodGet, base+"/status", func(w http.ResponseWriter, _ *http.Request) {
		ft.mu.Lock()
		ft.polls++
		done := ft.polls > ft.running
		echo := ft.echo
		ft.mu.Unlock()
		if echo == "" {
			echo = upid
		}
		st := map[string]any{"upid": echo, "node": node, "pid": 107187, "pstart": 12648430,
			"starttime": 1737619937, "type": "qmstart", "id": "100", "user": "root@pam", "status": "running"}
		if done {
			st["status"] = "stopped"
			st["exitstatus"] = exit
		}
		b, _ := json.Marshal(st, json.Deterministic(true))
		writeData(w, string(b))
	})
	f.on(http.MethodGet, base+"/log", func(w http.ResponseWriter, _ *http.Request) {
		lines := make([]map[string]any, len(log))
		for i, l := range log {
			lines[i] = map[string]any{"n": i + 1, "t": l}
		}
		b, _ := json.Marshal(lines)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"data":%s,"total":%d}`, b, len(log))
	})
	return ft
}

func (ft *fakeTask) pollCount() int {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	return ft.polls
}

func writeData(w http.ResponseWriter, raw string) {
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	fmt.Fprintf(w, `{"data":%s}`, raw)
}

// pveError writes the status line itself: net/http always writes the
// canonical reason phrase, PVE writes its message there.
func pveError(w http.ResponseWriter, code int, msg string) {
	pveErrorBody(w, code, msg, nil)
}

func pveErrorBody(w http.ResponseWriter, code int, reason string, errs map[string]string) {
	env := map[string]any{"data": nil, "message": reason + "\n"}
	if errs != nil {
		env["errors"] = errs
	}
	body, _ := json.Marshal(env)
	conn, buf, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\nContent-Type: application/json;charset=UTF-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		code, reason, len(body), body)
	_ = buf.Flush()
}

// dropConnection closes the connection without answering: the request
// reached the server, the client learns nothing.
func dropConnection(w http.ResponseWriter, _ *http.Request) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	_ = conn.Close()
}

// logBuffer is a goroutine-safe sink for zerolog.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func debugLogger(buf *logBuffer) zerolog.Logger {
	return zerolog.New(buf).Level(zerolog.DebugLevel)
}

func asError(t *testing.T, err error) *Error {
	t.Helper()
	if err == nil {
		t.Fatal("expected an error, got nil")
	}
	pe, ok := err.(*Error)
	if !ok {
		t.Fatalf("error %T (%v) is not *pve.Error", err, err)
	}
	return pe
}

var bg = context.Background()

func contextWithCancel() (context.Context, context.CancelFunc) {
	return context.WithCancel(context.Background())
}

func (f *fakePVE) handler(method, path string) http.HandlerFunc {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.routes[method+" "+path]
}
