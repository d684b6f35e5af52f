package api_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/api"
	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
	"github.com/converge-pve/converge/projector"
)

// Found by review: a client that never reads held a stream's slot for
// ever on a quiet cluster (pings are too small to fill a socket buffer,
// so the per-line deadline never fired), HEAD held one while its answer
// was discarded, one token could hold every slot, and Shutdown waited on
// a stream stuck writing to such a client.
func TestStreamLimits(t *testing.T) {
	f := newFixture(t)
	f.putDoc(t, views.GuestDoc{View: &projector.View{VMID: 101, Cluster: "pve"}, Status: planner.Status{Kind: planner.Converged}, UpdatedAt: t0})
	f.server.MaxStreams = 4 // a quarter, 1, per token
	srv := httptest.NewServer(f.server.Handler())
	t.Cleanup(srv.Close)
	open := func(method, token string) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(f.ctx, method, srv.URL+"/v1/stream", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = resp.Body.Close() })
		return resp
	}
	if r := open("HEAD", viewerToken); r.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("HEAD /v1/stream: %d, want 405", r.StatusCode)
	}
	first := open("GET", viewerToken)
	if first.StatusCode != http.StatusOK {
		t.Fatalf("first stream: %d", first.StatusCode)
	}
	if r := open("GET", viewerToken); r.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a second stream of the same token: %d, want 503", r.StatusCode)
	}
	if r := open("GET", portalToken); r.StatusCode != http.StatusOK {
		t.Fatalf("another token's stream: %d, want 200", r.StatusCode)
	}
}

// A stream ends by itself after MaxStreamAge, cleanly: the console
// reconnects.
func TestStreamAge(t *testing.T) {
	f := newFixture(t)
	f.putDoc(t, views.GuestDoc{View: &projector.View{VMID: 101, Cluster: "pve"}, Status: planner.Status{Kind: planner.Converged}, UpdatedAt: t0})
	f.server.MaxStreamAge = 300 * time.Millisecond
	srv := httptest.NewServer(f.server.Handler())
	t.Cleanup(srv.Close)
	req, _ := http.NewRequestWithContext(f.ctx, "GET", srv.URL+"/v1/stream", nil)
	req.Header.Set("Authorization", "Bearer "+viewerToken)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	lines := 0
	for sc.Scan() {
		lines++
	}
	if err := sc.Err(); err != nil || lines < 3 {
		t.Fatalf("stream ended after %d lines: %v (want hello, guest, synced, then a clean end)", lines, err)
	}
}

// Shutdown does not wait on a stream whose client stopped reading while
// the stream had much to say (it would wait for the 30 s line deadline).
func TestStreamShutdownCutsAStalledWrite(t *testing.T) {
	f := newFixture(t)
	pad := strings.Repeat("x", 16<<10)
	for i := range 300 {
		f.putDoc(t, views.GuestDoc{View: &projector.View{VMID: 100 + i, Cluster: "pve"},
			Status: planner.Status{Kind: planner.Pending, Reason: pad}, UpdatedAt: t0})
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := api.DefaultLimits().Server(f.server.Handler())
	hs.RegisterOnShutdown(f.server.EndStreams)
	go func() { _ = hs.Serve(ln) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4096)
	}
	fmt.Fprintf(c, "GET /v1/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n", viewerToken)
	br := bufio.NewReader(c)
	if status, err := br.ReadString('\n'); err != nil || !strings.Contains(status, "200") {
		t.Fatalf("stream: %q %v", status, err)
	}
	// Never read again: the server's writes fill the socket buffers and
	// block. Shutdown has 10 s, the line deadline is 30 s.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := hs.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown with a stalled stream: %v", err)
	}
}
