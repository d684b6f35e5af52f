package e2e

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/converge-pve/converge/internal/natsauth"
)

// natsConnect connects as the admin of the `converge up` whose data
// directory is $CONVERGE_DATA, if it has generated credentials; as
// anyone otherwise (an unauthenticated test server).
func natsConnect(t *testing.T, url string, opts ...nats.Option) (*nats.Conn, error) {
	t.Helper()
	if dir := os.Getenv("CONVERGE_DATA"); dir != "" {
		creds, ok, err := natsauth.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			opts = append(opts, nats.UserInfo(string(natsauth.Admin), creds[natsauth.Admin]))
		}
	}
	return nats.Connect(url, opts...)
}

// Issue 18: anyone who reached the embedded NATS could make converge act.
// `converge up` now generates one user per role under its data directory
// and refuses clients without credentials; the CLI on the same host, run
// where up keeps its data, needs no flags at all.
func TestUpRequiresNATSAuthentication(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	cwd := t.TempDir()
	// The CLI's default NATS address is up's default, 127.0.0.1:4222: use
	// it when it is free, so that the CLI runs with no flag at all.
	natsAddr, cliArgs := "127.0.0.1:4222", []string{}
	if ln, err := net.Listen("tcp", natsAddr); err != nil {
		natsAddr = freeAddr(t)
		cliArgs = []string{"--nats", "nats://" + natsAddr}
		t.Logf("4222 is taken: the CLI gets --nats %s (and no credential flag)", natsAddr)
	} else {
		ln.Close()
	}
	httpAddr := freeAddr(t)
	up := exec.Command(converge, "up", "--sim", "--sim-guests", "4", "--sim-listen", freeAddr(t), "--http", httpAddr,
		"--nats-listen", natsAddr, "--observe-interval", "200ms")
	up.Dir = cwd
	logf, err := os.Create(filepath.Join(t.TempDir(), "up.log"))
	if err != nil {
		t.Fatal(err)
	}
	up.Stdout, up.Stderr = logf, logf
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = up.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = up.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = up.Process.Kill()
			<-done
		}
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("--- up log ---\n%s", tail(string(b), 4000))
		}
	})
	credsFile := filepath.Join(cwd, "converge-data", natsauth.CredentialsFile)
	eventually(t, 60*time.Second, "up's NATS credentials and readiness", func() bool {
		if _, err := os.Stat(credsFile); err != nil {
			return false
		}
		res, err := http.Get("http://" + httpAddr + "/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == 200
	})
	if st, err := os.Stat(credsFile); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v %v, want mode 0600", credsFile, st.Mode(), err)
	}

	// No credentials, wrong ones, or a role's password under another
	// name: refused.
	url := "nats://" + natsAddr
	creds, _, err := natsauth.Load(filepath.Join(cwd, "converge-data"))
	if err != nil {
		t.Fatal(err)
	}
	for _, opts := range [][]nats.Option{nil, {nats.UserInfo("admin", "guess")}, {nats.UserInfo("admin", creds[natsauth.Auditor])}} {
		if nc, err := nats.Connect(url, opts...); err == nil {
			nc.Close()
			t.Fatalf("an unauthenticated NATS client was accepted (%d options)", len(opts))
		} else if !strings.Contains(strings.ToLower(err.Error()), "authorization") {
			t.Fatalf("refused for another reason: %v", err)
		}
	}

	// The CLI, run where up keeps its data, needs no credential flag.
	cli := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		c := exec.CommandContext(ctx, converge, append(args, cliArgs...)...)
		c.Dir = cwd
		c.Env = append(os.Environ(), "CONVERGE_LOG_LEVEL=warn", "CONVERGE_DATA=", "CONVERGE_NATS_URL=")
		out, err := c.CombinedOutput()
		return string(out), err
	}
	if out, err := cli("desire", "101", "--power", "running", "--cores", "2"); err != nil {
		t.Fatalf("desire: %v\n%s", err, out)
	}
	if out, err := cli("wait", "101", "--timeout", "90s"); err != nil {
		t.Fatalf("wait: %v\n%s", err, out)
	}
	if out, err := cli("status", "-o", "json", "101"); err != nil || !strings.Contains(out, `"converged"`) {
		t.Fatalf("status: %v\n%s", err, out)
	}
	// Elsewhere (no data directory), the CLI is refused and says why.
	c := exec.Command(converge, append([]string{"status"}, cliArgs...)...)
	c.Dir = t.TempDir()
	c.Env = append(os.Environ(), "CONVERGE_LOG_LEVEL=warn", "CONVERGE_DATA=", "CONVERGE_NATS_URL=")
	out, err := c.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "run where `converge up` keeps its data") {
		t.Fatalf("status without credentials: %v\n%s", err, out)
	}
}
