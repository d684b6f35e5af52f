package app_test

import (
	"strings"
	"testing"

	"github.com/converge-pve/converge/internal/observer"
	"github.com/converge-pve/converge/internal/pvesim"
)

// A process's roles reach its embedded NATS over loopback TCP, not over
// nats.go's unbuffered in-process pipe (natsserver.LocalURL says why).
func TestEmbeddedNATSOverLoopback(t *testing.T) {
	p := startPipeline(t, pvesim.Options{Nodes: 1, Guests: 1}, observer.Config{})
	if u := p.a.Bus().NC.ConnectedAddr(); !strings.HasPrefix(u, "127.0.0.1:") {
		t.Fatalf("connected to %q; want the embedded server's loopback listener", u)
	}
	p.pass(t)
}
