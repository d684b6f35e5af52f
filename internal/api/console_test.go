package api_test

import (
	"strings"
	"testing"
)

// The console's pages are served at / and /assets/ without a token (they
// hold no data), with its security headers; /v1 stays guarded, and no
// other path falls through to the pages.
func TestConsoleMounted(t *testing.T) {
	f := newFixture(t)
	for _, p := range []string{"/", "/assets/console.js", "/assets/console.css"} {
		r := f.do(t, "GET", p, nil, "Authorization", "")
		if r.code != 200 || !strings.Contains(r.hdr.Get("Content-Security-Policy"), "default-src 'none'") {
			t.Errorf("GET %s without a token: %d, CSP %q", p, r.code, r.hdr.Get("Content-Security-Policy"))
		}
	}
	if r := f.do(t, "GET", "/v1/guests", nil, "Authorization", ""); r.code != 401 {
		t.Errorf("GET /v1/guests without a token: %d, want 401", r.code)
	}
	for _, p := range []string{"/index.html", "/v2", "/assets/missing.js"} {
		if r := f.do(t, "GET", p, nil); r.code != 404 {
			t.Errorf("GET %s: %d, want 404", p, r.code)
		}
	}
	if r := f.do(t, "POST", "/", []byte("{}")); r.code != 405 {
		t.Errorf("POST /: %d, want 405", r.code)
	}
}
