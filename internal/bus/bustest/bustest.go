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

// New starts a server for the test and returns a provisioned bus on it;
// opts adjust its Config (Limited: a journal with a keep stream).
func New(t testing.TB, opts ...func(*bus.Config)) *bus.Bus {
	t.Helper()
	s, err := natsserver.Start(natsserver.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	b := Connect(t, s, opts...)
	mu.Lock()
	servers[b] = s
	mu.Unlock()
	return b
}

// Limited gives the journal an age limit that no test reaches: a journal
// with retention limits, so with the keep stream (docs/retention.md).
func Limited(c *bus.Config) { c.MaxAge = 365 * 24 * time.Hour }

// Connect returns a provisioned bus on an existing server; opts adjust
// its Config.
func Connect(t testing.TB, s *server.Server, opts ...func(*bus.Config)) *bus.Bus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := bus.DefaultConfig()
	cfg.InProcess, cfg.Name, cfg.Logger = s, t.Name(), zerolog.Nop()
	for _, o := range opts {
		o(&cfg)
	}
	b, err := bus.Connect(ctx, cfg)
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
