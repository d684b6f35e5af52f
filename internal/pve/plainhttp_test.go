package pve_test

import (
	"testing"

	"github.com/converge-pve/converge/internal/pve"
)

func TestPlainHTTPAndLoopback(t *testing.T) {
	cases := []struct {
		url             string
		plain, loopback bool
	}{
		{"https://pve1:8006/api2/json", false, false},
		{"http://pve1:8006", true, false},
		{"HTTP://pve1:8006", true, false},
		{"http://127.0.0.1:8006/api2/json", true, true},
		{"http://[::1]:8006", true, true},
		{"https://localhost:8006", false, true},
		{"http://0.0.0.0:8006", true, false},
	}
	for _, c := range cases {
		cfg := pve.DefaultConfig()
		cfg.URL = c.url
		if got := cfg.PlainHTTP(); got != c.plain {
			t.Errorf("%s: PlainHTTP %t, want %t", c.url, got, c.plain)
		}
		if got := cfg.Loopback(); got != c.loopback {
			t.Errorf("%s: Loopback %t, want %t", c.url, got, c.loopback)
		}
	}
}
