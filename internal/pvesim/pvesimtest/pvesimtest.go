package pvesimtest

import (
	"context"
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/pvesim"
)

// The credentials New gives a simulator whose options name none.
const (
	TokenID     = "root@pam!converge"
	TokenSecret = "0b5e2d4c-1111-4222-8333-444455556666"
	Password    = "pw-sim"
)

// New returns a simulator, not started, with opts; where opts has no Tokens
// it accepts the token TokenID=TokenSecret, and where it has no Password
// root@pam logs in with Password.
func New(t testing.TB, opts pvesim.Options) *pvesim.Sim {
	t.Helper()
	if opts.Tokens == nil {
		opts.Tokens = map[string]string{TokenID: TokenSecret}
	}
	if opts.Password == "" {
		opts.Password = Password
	}
	s, err := pvesim.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Start returns a simulator made by New and serving on a loopback port
// until the test's cleanup.
func Start(t testing.TB, opts pvesim.Options) *pvesim.Sim {
	t.Helper()
	s := New(t, opts)
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Client returns a client for s, authenticated by the token TokenID.
func Client(t testing.TB, s *pvesim.Sim) *pve.Client {
	t.Helper()
	return ClientAt(t, s.URL())
}

// ClientAt is Client for a simulator served at url, e.g. through a test
// server in front of it.
func ClientAt(t testing.TB, url string) *pve.Client {
	t.Helper()
	pc := pve.DefaultConfig()
	pc.URL, pc.TokenID, pc.TokenSecret, pc.Timeout = url, TokenID, TokenSecret, 10*time.Second
	c, err := pve.New(pc)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Context returns a context that ends after a minute or at the test's
// cleanup, whichever is first.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
