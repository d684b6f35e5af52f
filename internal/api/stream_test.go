package api_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/api"
	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
	"github.com/converge-pve/converge/projector"
)

type streamLine struct {
	Type    string       `json:"type"`
	Cluster string       `json:"cluster"`
	Who     string       `json:"who"`
	Scope   string       `json:"scope"`
	Guest   *summaryJSON `json:"guest"`
}

// lineReader reads a stream's lines; pings are counted and skipped.
type lineReader struct {
	sc    *bufio.Scanner
	pings int
}

func (l *lineReader) next(t *testing.T) streamLine {
	t.Helper()
	for l.sc.Scan() {
		var s streamLine
		if err := json.Unmarshal(l.sc.Bytes(), &s); err != nil {
			t.Fatalf("stream line %q: %v", l.sc.Bytes(), err)
		}
		if s.Type == "ping" {
			l.pings++
			continue
		}
		return s
	}
	t.Fatalf("stream ended: %v", l.sc.Err())
	return streamLine{}
}

// GET /v1/stream over a real server whose WriteTimeout has passed before
// the handler writes anything: hello, the current guests, synced, then a
// guest written after that, and pings; a second stream beyond MaxStreams
// is 503; EndStreams (the server's shutdown) ends the open one.
func TestStream(t *testing.T) {
	f := newFixture(t)
	doc := func(vmid int, kind planner.StatusKind) views.GuestDoc {
		return views.GuestDoc{View: &projector.View{VMID: vmid, Cluster: "pve"}, Status: planner.Status{Kind: kind}, UpdatedAt: t0}
	}
	f.putDoc(t, doc(101, planner.Converged))
	f.server.MaxStreams, f.server.PingEvery = 1, 5*time.Millisecond
	lim := api.DefaultLimits()
	lim.WriteTimeout = time.Nanosecond // expired before any answer is written
	srv := httptest.NewUnstartedServer(nil)
	srv.Config = lim.Server(f.server.Handler())
	srv.Start()
	t.Cleanup(srv.Close)
	get := func(token string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(f.ctx, "GET", srv.URL+"/v1/stream", nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = resp.Body.Close() })
		return resp
	}

	// Refusals are ordinary answers, which this server's WriteTimeout
	// cuts: they are asked of the handler directly.
	if r := f.do(t, "GET", "/v1/stream", nil, "Authorization", ""); r.code != http.StatusUnauthorized {
		t.Fatalf("no token: %d %s", r.code, r.body)
	}
	resp := get(viewerToken) // a read token may stream
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("stream: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	lr := &lineReader{sc: bufio.NewScanner(resp.Body)}
	if l := lr.next(t); l.Type != "hello" || l.Cluster != "pve" || l.Who != "token:viewer" || l.Scope != "read" {
		t.Fatalf("first line %+v", l)
	}
	if l := lr.next(t); l.Type != "guest" || l.Guest == nil || l.Guest.VMID != 101 || l.Guest.State != "converged" {
		t.Fatalf("current guest %+v", l)
	}
	if l := lr.next(t); l.Type != "synced" {
		t.Fatalf("after the current guests %+v", l)
	}
	if r := f.do(t, "GET", "/v1/stream", nil); r.code != http.StatusServiceUnavailable {
		t.Fatalf("a stream beyond MaxStreams: %d %s", r.code, r.body)
	}
	f.putDoc(t, doc(102, planner.Held))
	if l := lr.next(t); l.Type != "guest" || l.Guest.VMID != 102 || l.Guest.State != "held" {
		t.Fatalf("update %+v", l)
	}
	// A stream that says nothing else still pings.
	for lr.pings == 0 && lr.sc.Scan() {
		var l streamLine
		if err := json.Unmarshal(lr.sc.Bytes(), &l); err != nil || l.Type != "ping" {
			t.Fatalf("idle stream: %q %v", lr.sc.Bytes(), err)
		}
		lr.pings++
	}
	f.server.EndStreams()
	for lr.sc.Scan() { // pings may still be in flight; then the end
	}
	if err := lr.sc.Err(); err != nil {
		t.Fatalf("stream after EndStreams: %v", err)
	}
	if r := f.do(t, "GET", "/v1/stream", nil); r.code != http.StatusServiceUnavailable {
		t.Fatalf("a stream after EndStreams: %d %s", r.code, r.body)
	}
}
