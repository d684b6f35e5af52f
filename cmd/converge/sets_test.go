package main

import (
	"strings"
	"testing"

	"github.com/converge-pve/converge/internal/natsauth"
	"github.com/converge-pve/converge/internal/natsserver"
)

// desire --set NAME --prune as the publisher NATS user is refused before
// anything is published (nothing journalled); the api user publishes the
// set.
func TestDesirePruneNeedsControlUser(t *testing.T) {
	clearEnv(t)
	creds, _, err := natsauth.LoadOrCreate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := natsserver.Start(natsserver.Options{DataDir: t.TempDir(), Listen: "127.0.0.1:-1", Users: creds.Users(natsauth.Names{})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	as := func(r natsauth.Role, args ...string) (string, error) {
		t.Setenv("CONVERGE_NATS_PASSWORD", creds[r])
		return run(t, append([]string{"--nats", srv.ClientURL(), "--nats-user", string(r)}, args...)...)
	}
	if out, err := as(natsauth.Admin, "provision"); err != nil {
		t.Fatalf("provision: %v\n%s", err, out)
	}
	file := writeConfig(t, "- {vmid: 101, power: running}\n- {vmid: 102, power: stopped}\n")
	stored := func() uint64 {
		t.Helper()
		info, err := srv.Jsz(nil)
		if err != nil {
			t.Fatal(err)
		}
		return info.Messages
	}
	before := stored()
	out, err := as(natsauth.Publisher, "desire", "-f", file, "--set", "web", "--prune")
	if err == nil || !strings.Contains(err.Error(), "may not publish") || !strings.Contains(err.Error(), "nothing was published") {
		t.Fatalf("publisher's --prune: %v\n%s", err, out)
	}
	if after := stored(); after != before {
		t.Fatalf("a refused --prune stored %d messages", after-before)
	}
	out, err = as(natsauth.API, "desire", "-f", file, "--set", "web", "--prune")
	if err != nil || !strings.Contains(out, "journalled in set web") || !strings.Contains(out, "nothing released") {
		t.Fatalf("api's --prune: %v\n%s", err, out)
	}
}
