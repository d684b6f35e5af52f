package app_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/converge-pve/converge/internal/app"
	"github.com/converge-pve/converge/internal/pvesim"
)

// A process's roles reach its embedded NATS over loopback TCP, not over
// nats.go's unbuffered in-process pipe (natsserver.LocalURL says why).
func TestEmbeddedNATSOverLoopback(t *testing.T) {
	p := startPipeline(t, pvesim.Options{Nodes: 1, Guests: 1}, nil)
	if u := p.a.Bus().NC.ConnectedAddr(); !strings.HasPrefix(u, "127.0.0.1:") {
		t.Fatalf("connected to %q; want the embedded server's loopback listener", u)
	}
	p.pass(t)
}

// With an operator's nats-server configuration (which may require TLS, or
// admit a user only in-process) the roles keep the in-process connection,
// and the pipeline works over it.
func TestEmbeddedNATSWithConfigFileInProcess(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(conf, []byte("max_payload: 1048576\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startPipeline(t, pvesim.Options{Nodes: 1, Guests: 1}, nil, func(c *app.Config) {
		c.Embedded.ConfigFile = conf
	})
	if u := p.a.Bus().NC.ConnectedAddr(); u != "pipe" {
		t.Fatalf("connected to %q; want the in-process pipe", u)
	}
	p.pass(t)
}
