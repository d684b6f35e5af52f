package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/internal/pvesim"
)

// converge runs this test binary as the converge binary (TestMain) with
// args, and returns its output and exit status. It is killed after limit.
func converge(t *testing.T, limit time.Duration, args ...string) (string, int, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(cleanEnv(), "CONVERGE_RUN_MAIN=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0, took
	case errors.As(err, &ee):
		return out.String(), ee.ExitCode(), took
	}
	t.Fatalf("converge %v: %v\n%s", args, err, out.String())
	return "", 0, 0
}

// cleanEnv is the environment without converge's and Proxmox's variables.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CONVERGE_") && !strings.HasPrefix(kv, "PVE_") {
			env = append(env, kv)
		}
	}
	return env
}

func startSim(t *testing.T, tls bool) (*pvesim.Sim, string, string) {
	t.Helper()
	id, secret := "converge@pve!t", "0d2f-right-secret"
	sim, err := pvesim.New(pvesim.Options{Nodes: 1, Guests: 1, Tokens: map[string]string{id: secret}, TLS: tls, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	return sim, id, secret
}

// upArgs are up's flags for a test: everything on loopback, free ports,
// data in a temp dir.
func upArgs(t *testing.T, extra ...string) []string {
	return append([]string{"up", "--data", t.TempDir(), "--nats-listen", "127.0.0.1:0", "--http", "", "--log-format", "json"}, extra...)
}

func wantSays(t *testing.T, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(strings.ToLower(out), strings.ToLower(w)) {
			t.Errorf("output does not say %q:\n%s", w, out)
		}
	}
}

// A Proxmox that refuses the token fails the start at once, saying which
// flags to check; it used to start and log 401s for ever.
func TestStartFailsOnRejectedToken(t *testing.T) {
	sim, id, _ := startSim(t, false)
	out, code, _ := converge(t, time.Minute, upArgs(t, "--pve-url", sim.URL(), "--pve-token-id", id, "--pve-token-secret", "wrong")...)
	if code != exitError {
		t.Fatalf("exit status %d, want %d\n%s", code, exitError, out)
	}
	wantSays(t, out, "refuses converge's credentials", "--pve-token-id", "--pve-token-secret", "CONVERGE_PVE_TOKEN_SECRET", "--wait-for-proxmox",
		"privileges README.md lists", "Pointing converge at a real Proxmox")
	if strings.Contains(out, "architecture.md") {
		t.Errorf("the privileges are listed in README.md, not docs/architecture.md:\n%s", out)
	}
	if strings.Contains(out, "embedded NATS JetStream running") {
		t.Errorf("NATS started before the check:\n%s", out)
	}
}

// A certificate converge does not trust fails the start, naming
// --pve-fingerprint (with the certificate's fingerprint) and --pve-ca.
func TestStartFailsOnUntrustedCertificate(t *testing.T) {
	sim, id, secret := startSim(t, true)
	out, code, _ := converge(t, time.Minute, upArgs(t, "--pve-url", sim.URL(), "--pve-token-id", id, "--pve-token-secret", secret)...)
	if code != exitError {
		t.Fatalf("exit status %d, want %d\n%s", code, exitError, out)
	}
	wantSays(t, out, "does not trust", "--pve-fingerprint", "--pve-ca", sim.Fingerprint())
	// Pinned, the check passes: up goes on to its NATS, whose port is
	// taken here so that it stops there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	out, code, _ = converge(t, time.Minute, upArgs(t, "--pve-url", sim.URL(), "--pve-token-id", id, "--pve-token-secret", secret,
		"--pve-fingerprint", sim.Fingerprint(), "--nats-listen", ln.Addr().String())...)
	if strings.Contains(out, "does not trust") || !strings.Contains(out, "address already in use") {
		t.Fatalf("pinned: exit %d\n%s", code, out)
	}
}

// A busy --nats-listen port fails at once, not after nats-server's 30 s.
func TestStartFailsOnBusyNATSPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	out, code, took := converge(t, time.Minute, upArgs(t, "--sim", "--sim-listen", "127.0.0.1:0", "--nats-listen", ln.Addr().String())...)
	if code != exitError {
		t.Fatalf("exit status %d, want %d\n%s", code, exitError, out)
	}
	wantSays(t, out, "address already in use", "--nats-listen", ln.Addr().String())
	if took > 5*time.Second {
		t.Errorf("took %s to fail", took)
	}
}

// With --wait-for-proxmox a refused token does not stop the start: up
// runs, /readyz answers 503 naming Proxmox, and it stops on SIGTERM.
func TestWaitForProxmoxRunsNotReady(t *testing.T) {
	sim, id, _ := startSim(t, false)
	httpAddr := freeAddr(t)
	cmd := exec.Command(os.Args[0], upArgs(t, "--pve-url", sim.URL(), "--pve-token-id", id, "--pve-token-secret", "wrong",
		"--wait-for-proxmox", "--http", httpAddr)...)
	cmd.Env = append(cleanEnv(), "CONVERGE_RUN_MAIN=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-done
	}()
	deadline := time.Now().Add(time.Minute)
	for {
		res, err := http.Get("http://" + httpAddr + "/readyz")
		if err == nil {
			var b bytes.Buffer
			_, _ = b.ReadFrom(res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusServiceUnavailable && strings.Contains(b.String(), "proxmox") && strings.Contains(b.String(), "credentials") {
				return
			}
		}
		select {
		case err := <-done:
			t.Fatalf("up exited: %v\n%s", err, out.String())
		case <-time.After(50 * time.Millisecond): // polling an HTTP endpoint, not synchronising
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz never said Proxmox refuses the credentials\n%s", out.String())
		}
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// The first interrupt ends the context (the roles drain); the second
// forces the exit.
func TestSecondInterruptForces(t *testing.T) {
	forced := make(chan struct{})
	ctx, stop := interrupts(func() { close(forced) })
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	<-ctx.Done()
	select {
	case <-forced:
		t.Fatal("forced at the first interrupt")
	default:
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	<-forced
}
