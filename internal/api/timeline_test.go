package api_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/converge-pve/converge/internal/api"
)

// GET /v1/whoami names the token as the journal would and its scope; an
// unknown token is 401 (the console's sign-in).
func TestWhoami(t *testing.T) {
	f := newFixture(t)
	type who struct {
		Name, Scope, Cluster string
	}
	for tok, want := range map[string]who{portalToken: {"token:portal", "write", "pve"}, viewerToken: {"token:viewer", "read", "pve"}} {
		r := f.do(t, "GET", "/v1/whoami", nil, "Authorization", "Bearer "+tok)
		if got := decodeJSON[who](t, r); r.code != http.StatusOK || got != want {
			t.Errorf("whoami: %d %+v, want %+v", r.code, got, want)
		}
	}
	if r := f.do(t, "GET", "/v1/whoami", nil, "Authorization", "Bearer not-a-token-0123456789"); r.code != http.StatusUnauthorized {
		t.Errorf("unknown token: %d %s", r.code, r.body)
	}
	f.server.Guard = api.Guard{NoAuth: true}
	f.h = f.server.Handler()
	r := f.do(t, "GET", "/v1/whoami", nil, "Authorization", "")
	if got := decodeJSON[who](t, r); r.code != http.StatusOK || got != (who{"http (unauthenticated)", "write", "pve"}) {
		t.Errorf("without auth: %d %+v", r.code, got)
	}
}

// GET /v1/guests/{vmid}/timeline pages through Server.Timeline: before
// and limit as asked (limit 50 by default, 1..500), 503 without a reader
// or when it fails.
func TestTimeline(t *testing.T) {
	f := newFixture(t)
	if r := f.do(t, "GET", "/v1/guests/101/timeline", nil); r.code != http.StatusServiceUnavailable {
		t.Fatalf("without a timeline reader: %d %s", r.code, r.body)
	}
	type call struct {
		vmid   int
		before uint64
		limit  int
	}
	var calls []call
	var fail error
	f.server.Timeline = func(_ context.Context, vmid int, before uint64, limit int) (any, uint64, error) {
		calls = append(calls, call{vmid, before, limit})
		if fail != nil {
			return nil, 0, fail
		}
		return []map[string]any{{"seq": 40, "summary": "newest"}, {"seq": 30, "summary": "older"}}, 30, nil
	}
	f.h = f.server.Handler()
	type page struct {
		VMID       int `json:"vmid"`
		Cluster    string
		Entries    []map[string]any
		NextBefore uint64 `json:"next_before"`
	}
	r := f.do(t, "GET", "/v1/guests/101/timeline", nil, "Authorization", "Bearer "+viewerToken)
	got := decodeJSON[page](t, r)
	if r.code != http.StatusOK || got.VMID != 101 || got.Cluster != "pve" || len(got.Entries) != 2 || got.NextBefore != 30 ||
		got.Entries[0]["summary"] != "newest" {
		t.Fatalf("timeline: %d %s", r.code, r.body)
	}
	if r := f.do(t, "GET", "/v1/guests/101/timeline?before=30&limit=500", nil); r.code != http.StatusOK {
		t.Fatalf("second page: %d %s", r.code, r.body)
	}
	if want := []call{{101, 0, 50}, {101, 30, 500}}; len(calls) != 2 || calls[0] != want[0] || calls[1] != want[1] {
		t.Fatalf("calls %+v, want %+v", calls, want)
	}
	for _, q := range []string{"limit=0", "limit=501", "limit=ten", "before=-1", "before=x"} {
		if r := f.do(t, "GET", "/v1/guests/101/timeline?"+q, nil); r.code != http.StatusBadRequest {
			t.Errorf("%s: %d %s", q, r.code, r.body)
		}
	}
	if r := f.do(t, "GET", "/v1/guests/abc/timeline", nil); r.code != http.StatusBadRequest {
		t.Errorf("bad vmid: %d", r.code)
	}
	fail = errors.New("journal: stream PVE: timeout")
	if r := f.do(t, "GET", "/v1/guests/101/timeline", nil); r.code != http.StatusServiceUnavailable {
		t.Errorf("failing reader: %d %s", r.code, r.body)
	}
	if r := f.do(t, "GET", "/v1/guests/101/timeline", nil, "Authorization", ""); r.code != http.StatusUnauthorized {
		t.Errorf("no token: %d", r.code)
	}
	if len(calls) != 3 {
		t.Errorf("refused requests reached the reader: %d calls", len(calls))
	}
}
