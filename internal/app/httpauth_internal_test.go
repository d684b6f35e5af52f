package app

import (
	"strings"
	"testing"

	"github.com/converge-pve/converge/internal/api"
)

// Binding the API where others reach it needs TLS once /v1 is open;
// serving /v1 without tokens is for loopback only.
func TestHTTPAuthCheck(t *testing.T) {
	tokens, err := api.ParseTokens("t", []byte("tokens: [{name: a, scope: write, token: 0123456789abcdef}]"))
	if err != nil {
		t.Fatal(err)
	}
	open := api.Guard{Tokens: tokens}
	cases := []struct {
		name, addr string
		h          HTTPAuth
		err, warn  string
	}{
		{"loopback with tokens", "127.0.0.1:8080", HTTPAuth{Guard: open}, "", ""},
		{"loopback, /v1 closed", "127.0.0.1:8080", HTTPAuth{}, "", ""},
		{"no-auth on loopback", "[::1]:8080", HTTPAuth{Guard: api.Guard{NoAuth: true}}, "", "WITHOUT AUTHENTICATION"},
		{"no-auth elsewhere", "0.0.0.0:8080", HTTPAuth{Guard: api.Guard{NoAuth: true}, Insecure: true}, "refused", ""},
		{"tokens in clear elsewhere", "0.0.0.0:8080", HTTPAuth{Guard: open}, "not a loopback address", ""},
		{"forced", "0.0.0.0:8080", HTTPAuth{Guard: open, Insecure: true}, "", "WITHOUT TLS"},
		{"TLS elsewhere", "192.0.2.1:8443", HTTPAuth{Guard: open, TLSCert: "c", TLSKey: "k"}, "", ""},
		{"metrics only elsewhere", "0.0.0.0:9090", HTTPAuth{}, "", ""},
		{"half TLS", "127.0.0.1:8080", HTTPAuth{Guard: open, TLSCert: "c"}, "go together", ""},
	}
	for _, c := range cases {
		warn, err := c.h.check(c.addr)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: err %v, want %q", c.name, err, c.err)
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case !strings.Contains(warn, c.warn) || (c.warn == "" && warn != ""):
			t.Errorf("%s: warn %q, want %q", c.name, warn, c.warn)
		}
	}
}
