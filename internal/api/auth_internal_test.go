package api

import (
	"crypto/tls"
	"net/http/httptest"
	"testing"
)

// sameOrigin accepts https:// for a plain-HTTP request (a TLS-terminating
// proxy in front), never http:// for a request that came over TLS, and
// never another host.
func TestSameOrigin(t *testing.T) {
	plain := httptest.NewRequest("POST", "http://converge.example/v1/approve", nil)
	overTLS := httptest.NewRequest("POST", "https://converge.example/v1/approve", nil)
	overTLS.TLS = &tls.ConnectionState{}
	for _, c := range []struct {
		origin string
		tls    bool
		want   bool
	}{
		{"http://converge.example", false, true},
		{"https://converge.example", false, true},
		{"HTTPS://Converge.Example", false, true},
		{"https://converge.example", true, true},
		{"http://converge.example", true, false},
		{"https://evil.example", false, false},
		{"https://converge.example:8443", false, false},
	} {
		r := plain
		if c.tls {
			r = overTLS
		}
		if got := sameOrigin(c.origin, r); got != c.want {
			t.Errorf("Origin %s, TLS %v: %v, want %v", c.origin, c.tls, got, c.want)
		}
	}
}
