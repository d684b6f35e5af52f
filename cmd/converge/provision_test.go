package main

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/internal/natsauth"
	"github.com/converge-pve/converge/internal/natsserver"
)

// `converge provision`, run with the admin user of the shipped NATS
// configuration, creates everything the roles (which may not create
// streams or buckets) bind to.
func TestProvisionAsAdmin(t *testing.T) {
	srv := shippedServer(t)
	t.Setenv("CONVERGE_NATS_PASSWORD", "pw-admin-0123456789abcdef")
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"provision", "--nats", srv.ClientURL(), "--nats-user", "admin", "--data", t.TempDir()})
	if err := root.Execute(); err != nil || !strings.Contains(out.String(), "provisioned") {
		t.Fatalf("provision: %v\n%s", err, out.String())
	}
	nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo("admin", "pw-admin-0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, s := range []string{"PVE", "KV_converge_views", "KV_converge_leases", "OBJ_converge_checkpoints"} {
		if _, err := js.Stream(ctx, s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	// A journal without retention limits drops nothing: no keep stream.
	if _, err := js.Stream(ctx, "PVE_KEEP"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("PVE_KEEP without retention limits: %v, want none", err)
	}
	// The roles may not change the journal: its limits come from here,
	// with the keep stream.
	root = newRoot()
	out.Reset()
	root.SetOut(&out)
	root.SetArgs([]string{"provision", "--nats", srv.ClientURL(), "--nats-user", "admin", "--data", t.TempDir(), "--retention-age", "720h"})
	if err := root.Execute(); err != nil || !strings.Contains(out.String(), "PVE_KEEP") {
		t.Fatalf("provision --retention-age: %v\n%s", err, out.String())
	}
	if _, err := js.Stream(ctx, "PVE_KEEP"); err != nil {
		t.Errorf("PVE_KEEP with --retention-age: %v", err)
	}
	if s, err := js.Stream(ctx, "PVE"); err != nil || s.CachedInfo().Config.MaxAge != 720*time.Hour {
		t.Errorf("PVE with --retention-age 720h: %v", err)
	}
	// Provisioning again for another setting leaves the limits as they are.
	root = newRoot()
	root.SetOut(&out)
	root.SetArgs([]string{"provision", "--nats", srv.ClientURL(), "--nats-user", "admin", "--data", t.TempDir(), "--lease-ttl", "10s"})
	if err := root.Execute(); err != nil {
		t.Fatalf("provision --lease-ttl: %v", err)
	}
	if s, err := js.Stream(ctx, "PVE"); err != nil {
		t.Error(err)
	} else if got := s.CachedInfo().Config.MaxAge; got != 720*time.Hour {
		t.Errorf("PVE after a provisioning without --retention-*: max age %v, want 720h kept", got)
	}
}

// shippedServer starts a nats-server with the shipped single-node
// configuration (deploy/nats/converge.conf), each role's password
// pw-<role>-0123456789abcdef.
func shippedServer(t *testing.T) *server.Server {
	t.Helper()
	for _, r := range natsauth.Roles {
		t.Setenv(natsauth.PasswordVar(r), "pw-"+string(r)+"-0123456789abcdef")
	}
	// What converge.conf reads from the environment (the options below
	// override the address).
	t.Setenv("NATS_SERVER_NAME", "converge-1")
	t.Setenv("NATS_LISTEN", "127.0.0.1:-1")
	t.Setenv("NATS_STORE_DIR", t.TempDir())
	srv, err := natsserver.Start(natsserver.Options{DataDir: t.TempDir(), Listen: "127.0.0.1:-1",
		ConfigFile: filepath.Join("..", "..", "deploy", "nats", "converge.conf")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	return srv
}
