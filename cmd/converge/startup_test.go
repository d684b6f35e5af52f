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
	"sync"
	"sync/atomic"
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
	var clock atomic.Int64 // nanoseconds since start
	start := time.Now()
	now := func() time.Time { return start.Add(time.Duration(clock.Load())) }
	forced := make(chan struct{})
	ctx, stop := interrupts(func() { close(forced) }, now)
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
	clock.Store(int64(2 * time.Second))
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	<-forced
}

// Two interrupts at once (timeout -s INT delivers it twice) are one: the
// process drains; one a second or more after the first forces the exit.
func TestDuplicateInterruptIgnored(t *testing.T) {
	start := time.Now()
	// The clock as each signal is handled, in order; only the handler reads it.
	at := []time.Duration{0, 10 * time.Millisecond, 999 * time.Millisecond, 1500 * time.Millisecond}
	handled := 0
	now := func() time.Time { handled++; return start.Add(at[handled-1]) }
	ch := make(chan os.Signal) // unbuffered: a send returns once the one before it is handled
	forced := make(chan int, 1)
	ctx, stop := onInterrupts(ch, func() { forced <- handled }, now)
	defer stop()
	ch <- syscall.SIGINT
	<-ctx.Done()
	ch <- syscall.SIGINT
	ch <- syscall.SIGTERM
	ch <- syscall.SIGINT
	if n := <-forced; n != 4 {
		t.Fatalf("forced at signal %d, want the 4th (1.5 s after the first); the 2nd and 3rd came within a second", n)
	}
}

// startUp starts `converge up` on the simulator and waits for its hint;
// the caller signals and waits for it through the returned functions.
func startUp(t *testing.T, args ...string) (cmd *exec.Cmd, out *syncBuffer, wait func() int) {
	t.Helper()
	cmd = exec.Command(os.Args[0], upArgs(t, append([]string{"--sim", "--sim-listen", "127.0.0.1:0"}, args...)...)...)
	cmd.Env = append(cleanEnv(), "CONVERGE_RUN_MAIN=1")
	out = &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	code := -1
	go func() {
		err := cmd.Wait()
		code = 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		close(done)
	}()
	wait = func() int {
		select {
		case <-done:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("up did not exit\n%s", out.String())
		}
		return code
	}
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			_ = cmd.Process.Kill()
			<-done
		}
	})
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(out.String(), "Try this next") {
		select {
		case <-done:
			t.Fatalf("up exited %d\n%s", code, out.String())
		case <-time.After(20 * time.Millisecond): // polling the output of another process
		}
		if time.Now().After(deadline) {
			t.Fatalf("up never printed its hint\n%s", out.String())
		}
	}
	return cmd, out, wait
}

// syncBuffer is a bytes.Buffer a process writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Two SIGINTs at once (timeout -s INT reaches the process twice) drain
// like one: up exits 0 having stopped, not 130.
func TestUpDrainsOnDoubleInterrupt(t *testing.T) {
	cmd, out, wait := startUp(t)
	_ = cmd.Process.Signal(syscall.SIGINT)
	// The second as the drain starts (two sent at once may reach the
	// process as one).
	for !strings.Contains(out.String(), "observer stopped") && !strings.Contains(out.String(), "converge up: stopped") {
		time.Sleep(time.Millisecond) // polling the output of another process
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	if code := wait(); code != 0 || !strings.Contains(out.String(), "converge up: stopped") {
		t.Fatalf("exit %d, want 0 after draining\n%s", code, out.String())
	}
}

// up's hint works as printed with a non-default NATS port and data
// directory: its commands carry --nats and --data.
func TestUpHintCarriesNATSAndData(t *testing.T) {
	addr := freeAddr(t)
	cmd, out, wait := startUp(t, "--nats-listen", addr)
	var status string
	for _, l := range strings.Split(out.String(), "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "converge status") {
			status = l
		}
	}
	if !strings.Contains(status, "--nats nats://"+addr) || !strings.Contains(status, "--data ") {
		t.Fatalf("hint %q does not carry --nats and --data\n%s", status, out.String())
	}
	got, code, _ := converge(t, time.Minute, strings.Fields(status)[1:]...)
	// Run at once, the views may not be written yet: status says so.
	if code != 0 || !strings.Contains(got, "VMID") && !strings.Contains(got, "no guests in the views yet") {
		t.Fatalf("%s: exit %d\n%s", status, code, got)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	wait()
	if h := hintFlags("nats://"+defaultNATSListen, defaultData); h != "" {
		t.Fatalf("defaults: %q", h)
	}
}
