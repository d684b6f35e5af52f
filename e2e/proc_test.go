package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// converge is the path of the converge binary the tests run.
var converge string

// TestMain builds the converge binary the tests start (and SIGKILL) as
// real processes: once, into a temp dir, with the race detector when the
// tests run with it. CONVERGE_BIN names a prebuilt binary instead.
func TestMain(m *testing.M) {
	os.Exit(func() int {
		if converge = os.Getenv("CONVERGE_BIN"); converge != "" {
			return m.Run()
		}
		dir, err := os.MkdirTemp("", "converge-e2e-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		defer os.RemoveAll(dir)
		converge = filepath.Join(dir, "converge")
		args := []string{"build", "-o", converge}
		if raceEnabled {
			args = append(args, "-race")
		}
		build := exec.Command("go", append(args, "github.com/converge-pve/converge/cmd/converge")...)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: building converge:", err)
			return 1
		}
		return m.Run()
	}())
}

// proc is a converge process started by a test.
type proc struct {
	t    *testing.T
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

func startProc(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	return startExe(t, name, converge, nil, args...)
}

// startExe starts exe (converge, or another program a test runs beside
// it) with env added to the test's environment, its output in a log the
// test prints if it fails.
func startExe(t *testing.T, name, exe string, env []string, args ...string) *proc {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	lf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(append(os.Environ(), "CONVERGE_LOG_LEVEL=debug"), env...)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); lf.Close(); close(p.done) }()
	t.Cleanup(func() {
		p.stop(syscall.SIGTERM, 30*time.Second)
		if t.Failed() || os.Getenv("CONVERGE_TEST_LOGS") != "" {
			b, _ := os.ReadFile(logPath)
			n := 6000
			if os.Getenv("CONVERGE_TEST_LOGS") != "" {
				n = 1 << 30
			}
			t.Logf("--- %s log ---\n%s", name, tail(string(b), n))
		}
	})
	return p
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// stop signals the process (only the one this test started, by PID) and
// waits for it; after the timeout it is killed.
func (p *proc) stop(sig syscall.Signal, timeout time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// ready waits until url answers 200 (the process's /readyz), bounded by
// timeout; a process that exits first (its address taken, a bad flag)
// fails the test at once with its log's tail, not after the timeout.
func (p *proc) ready(t *testing.T, timeout time.Duration, url string) {
	t.Helper()
	eventually(t, timeout, url+" to answer 200", func() bool {
		select {
		case <-p.done:
			b, _ := os.ReadFile(p.log)
			t.Fatalf("%s exited before it was ready (%v):\n%s", url, p.err, tail(string(b), 3000))
		default:
		}
		res, err := http.Get(url)
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == 200
	})
}

// kill SIGKILLs the process and waits for it to be gone.
func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// runCLI runs a converge command to completion.
func runCLI(t *testing.T, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, converge, args...)
	cmd.Env = append(os.Environ(), "CONVERGE_LOG_LEVEL=warn")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String() + errb.String(), code
}

var portMu sync.Mutex

// freeAddr returns a loopback address with a port that was free just now.
func freeAddr(t *testing.T) string {
	t.Helper()
	portMu.Lock()
	defer portMu.Unlock()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// eventually polls an external condition (another process, the stream)
// until it holds or the deadline passes. It orders nothing by time: it
// only bounds how long the test waits.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

func contains(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}
