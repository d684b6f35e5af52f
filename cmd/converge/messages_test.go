package main

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/converge-pve/converge/internal/natsauth"
	"github.com/converge-pve/converge/internal/natsserver"
)

// notSays fails the test when out says any of words (case-insensitive).
func notSays(t *testing.T, out string, words ...string) {
	t.Helper()
	for _, w := range words {
		if strings.Contains(strings.ToLower(out), strings.ToLower(w)) {
			t.Errorf("output says %q:\n%s", w, out)
		}
	}
}

// No NATS at the address tried: the message names the address and says
// what to check (is `converge up` running, which --nats), not
// "bus: connect …: no servers available".
func TestNATSUnreachableSaysWhatToCheck(t *testing.T) {
	clearEnv(t)
	addr := freeAddr(t) // nothing listens there now
	_, err := run(t, "status", "--nats", "nats://"+addr, "--data", t.TempDir())
	if err == nil {
		t.Fatal("status against no NATS succeeded")
	}
	if !errors.Is(err, nats.ErrNoServers) {
		t.Errorf("%v does not wrap nats.ErrNoServers", err)
	}
	wantSays(t, err.Error(), "cannot connect to NATS at nats://"+addr, "running and reachable", "--nats", "CONVERGE_NATS", "--nats-listen")
	notSays(t, err.Error(), "bus:")

	// Without --nats the CLI tries up's default address: the hint is
	// about `converge up`.
	err = (&globals{}).natsAuthHint(fmt.Errorf("cannot connect to NATS at nats://%s: %w", defaultNATSListen, nats.ErrNoServers))
	wantSays(t, err.Error(), "nothing answers at nats://"+defaultNATSListen, "is `converge up` running", "--nats", "CONVERGE_NATS")
	if !errors.Is(err, nats.ErrNoServers) {
		t.Errorf("%v does not wrap nats.ErrNoServers", err)
	}
}

// NATS refusing a client that sent no credentials says so plainly: that
// converge sent none, where it looked for `converge up`'s, and what to
// pass; a refused password is named by its user, never shown.
func TestNATSRefusedCredentialsSaysWhichAndWhere(t *testing.T) {
	clearEnv(t)
	creds, _, err := natsauth.LoadOrCreate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := natsserver.Start(natsserver.Options{DataDir: t.TempDir(), Listen: "127.0.0.1:-1",
		Users: creds.Users(natsauth.Names{})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	empty := t.TempDir()
	_, err = run(t, "status", "--nats", srv.ClientURL(), "--data", empty)
	if err == nil {
		t.Fatal("status without credentials succeeded")
	}
	wantSays(t, err.Error(), "Authorization Violation", "converge sent no credentials", filepath.Join(empty, natsauth.CredentialsFile),
		"--data DIR", "CONVERGE_DATA", "--nats-user", "--nats-password-file", "CONVERGE_NATS_USER", "--nats-creds", "--nats-nkey")
	notSays(t, err.Error(), "refused no credentials", "bus:")

	const wrong = "not-the-password-0123456789"
	_, err = run(t, "status", "--nats", srv.ClientURL(), "--data", empty, "--nats-user", "publisher", "--nats-password", wrong)
	if err == nil {
		t.Fatal("status with a wrong password succeeded")
	}
	wantSays(t, err.Error(), `user "publisher"`, "--nats-password-file", "check them")
	notSays(t, err.Error(), wrong, creds[natsauth.Publisher], creds[natsauth.Admin])
}

// A busy --sim-listen port fails at once, naming the flag as the NATS
// one names --nats-listen, without the package's name.
func TestStartFailsOnBusySimPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	out, code, took := converge(t, time.Minute, upArgs(t, "--sim", "--sim-listen", ln.Addr().String())...)
	if code != exitError {
		t.Fatalf("exit status %d, want %d\n%s", code, exitError, out)
	}
	wantSays(t, out, "--sim-listen "+ln.Addr().String(), "address already in use", "another converge up or converge sim running", "choose another address")
	notSays(t, out, "pvesim")
	if took > 10*time.Second {
		t.Errorf("took %s to fail", took)
	}
}
