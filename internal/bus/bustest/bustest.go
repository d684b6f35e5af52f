package bustest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/natsserver"
)

var (
	mu      sync.Mutex
	servers = map[*bus.Bus]*server.Server{}
)

// New starts a server for the test and returns a provisioned bus on it.
func New(t testing.TB) *bus.Bus {
	t.Helper()
	s, err := natsserver.Start(natsserver.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	b := Connect(t, s)
	mu.Lock()
	servers[b] = s
	mu.Unlock()
	return b
}

// Connect returns a provisioned bus on an existing server.
func Connect(t testing.TB, s *server.Server) *bus.Bus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := bus.Connect(ctx, bus.Config{InProcess: s, Name: t.Name(), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if err := b.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	return b
}

// Server returns the server New started for b.
func Server(t testing.TB, b *bus.Bus) *server.Server {
	t.Helper()
	mu.Lock()
	s, ok := servers[b]
	mu.Unlock()
	if !ok {
		t.Fatal("bustest: bus not made by New")
	}
	return s
}
