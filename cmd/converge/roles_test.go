package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/internal/pve"
)

// A plain-http Proxmox URL was accepted without a word: the API token (or
// password) and every ticket cross the network in clear. It is warned
// about now, except for `up`'s own simulator on loopback.
func TestPlainHTTPProxmoxWarns(t *testing.T) {
	cases := []struct {
		name, url  string
		builtinSim bool
		warn       bool
	}{
		{"plain http", "http://pve1.example.org:8006", false, true},
		{"plain http on loopback, not up's simulator", "http://127.0.0.1:8006", false, true},
		{"https", "https://pve1.example.org:8006", false, false},
		{"up's simulator on loopback", "http://127.0.0.1:8006/api2/json", true, false},
		{"up's simulator on localhost", "http://localhost:8006", true, false},
		{"up's simulator on every interface", "http://0.0.0.0:8006", true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			f := &roleFlags{pve: pve.Config{URL: c.url, TokenID: "converge@pve!t", TokenSecret: "s3cret"}, builtinSim: c.builtinSim}
			if _, err := f.pveClient(zerolog.New(&buf)); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			warned := strings.Contains(out, `"level":"warn"`) && strings.Contains(out, "in clear")
			if warned != c.warn {
				t.Fatalf("%s: warned %t, want %t; log:\n%s", c.url, warned, c.warn, out)
			}
			if strings.Contains(out, "s3cret") {
				t.Fatalf("the secret is logged:\n%s", out)
			}
		})
	}
}
