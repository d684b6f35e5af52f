package api_test

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"
)

// TestGuestsVerifyPeriod: a process that runs the observer reports with
// the guests how long drift the inventory does not show may go unseen
// (the observer's verification period); one that does not, nothing.
func TestGuestsVerifyPeriod(t *testing.T) {
	f := newFixture(t)
	get := func() map[string]any {
		rec := httptest.NewRecorder()
		req := httptest.NewRequestWithContext(f.ctx, "GET", "/v1/guests", nil)
		req.Host = "127.0.0.1:8080"
		req.Header.Set("Authorization", "Bearer "+viewerToken)
		f.server.Handler().ServeHTTP(rec, req)
		var m map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
			t.Fatalf("/v1/guests body %q: %v", rec.Body, err)
		}
		return m
	}
	if m := get(); m["verify_period"] != nil {
		t.Fatalf("no observer, yet a verification period: %v", m)
	}
	f.server.VerifyPeriod = func() time.Duration { return 500 * time.Second }
	if m := get(); m["verify_period"] != "8m20s" || m["verify_period_ns"] != float64(500*time.Second) {
		t.Fatalf("verification period: %v", m)
	}
}
