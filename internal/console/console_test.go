package console_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/converge-pve/converge/internal/console"
)

func get(t *testing.T, h http.Handler, path string, hdr ...string) *http.Response {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Result()
}

// Every page and asset is served with its own content type and the
// security headers; unknown names are 404 and carry them too.
func TestHandlerServesAssets(t *testing.T) {
	h := console.Handler()
	for _, c := range []struct {
		path, ctype, contains string
		code                  int
	}{
		{"/", "text/html; charset=utf-8", `<script type="module" src="/assets/console.js">`, 200},
		{"/assets/index.html", "text/html; charset=utf-8", "<dialog", 200},
		{"/assets/console.js", "text/javascript; charset=utf-8", "sessionStorage", 200},
		{"/assets/api.js", "text/javascript; charset=utf-8", "/v1/stream", 200},
		{"/assets/guests.js", "text/javascript; charset=utf-8", "export function mount", 200},
		{"/assets/guest.js", "text/javascript; charset=utf-8", "export function mount", 200},
		{"/assets/approvals.js", "text/javascript; charset=utf-8", "export function mount", 200},
		{"/assets/timeline.js", "text/javascript; charset=utf-8", "next_before", 200},
		{"/assets/ui.js", "text/javascript; charset=utf-8", "showModal", 200},
		{"/assets/console.css", "text/css; charset=utf-8", "prefers-color-scheme: dark", 200},
		{"/assets/nothing.js", "text/plain; charset=utf-8", "not found", 404},
		{"/assets/../console.go", "text/plain; charset=utf-8", "not found", 404},
		{"/assets/", "text/plain; charset=utf-8", "not found", 404},
	} {
		res := get(t, h, c.path)
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != c.code || res.Header.Get("Content-Type") != c.ctype || !strings.Contains(string(body), c.contains) {
			t.Errorf("GET %s: %d %q, body %.80q; want %d %q containing %q", c.path, res.StatusCode, res.Header.Get("Content-Type"), body, c.code, c.ctype, c.contains)
		}
		for k, v := range map[string]string{
			"Content-Security-Policy": console.CSP, "X-Content-Type-Options": "nosniff",
			"Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY",
		} {
			if got := res.Header.Get(k); got != v {
				t.Errorf("GET %s: %s = %q, want %q", c.path, k, got, v)
			}
		}
	}
	if !strings.Contains(console.CSP, "script-src 'self';") || strings.Contains(console.CSP, "unsafe") {
		t.Errorf("CSP %q", console.CSP)
	}
}

// An unchanged asset is answered 304 to the ETag the browser holds.
func TestHandlerRevalidates(t *testing.T) {
	h := console.Handler()
	etag := get(t, h, "/assets/console.js").Header.Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	if res := get(t, h, "/assets/console.js", "If-None-Match", etag); res.StatusCode != http.StatusNotModified {
		t.Errorf("revalidation: %d, want 304", res.StatusCode)
	}
}
