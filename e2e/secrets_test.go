package e2e

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/natsserver"
	"github.com/converge-pve/converge/internal/pvesim"
)

// TestSecretsNeverShown (issue 18): the Proxmox token secret, read from a
// file, appears nowhere an operator or another local user can look: not
// in the process's command line, its log, /metrics, the HTTP API, `converge
// status`, nor any journal message; and a wrong secret is not echoed by the
// errors it causes.
func TestSecretsNeverShown(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	const tokenID, secret, wrong = "root@pam!sec", "s3cret-7f1e-0d2a-token", "wr0ng-9c4b-secret"
	srv, err := natsserver.Start(natsserver.Options{DataDir: t.TempDir(), Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	sim, err := pvesim.New(pvesim.Options{Guests: 4, Tokens: map[string]string{tokenID: secret}})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	dir := t.TempDir()
	secretFile, wrongFile := filepath.Join(dir, "token"), filepath.Join(dir, "wrong")
	for f, s := range map[string]string{secretFile: secret, wrongFile: wrong} {
		if err := os.WriteFile(f, []byte(s+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	natsURL, httpAddr, data := srv.ClientURL(), freeAddr(t), t.TempDir()
	up := startProc(t, "up", "up", "--nats", natsURL, "--http", httpAddr, "--data", data,
		"--pve-url", sim.URL(), "--pve-token-id", tokenID, "--pve-token-secret-file", secretFile,
		"--observe-interval", "200ms")
	// A second process with a wrong secret, in its own cluster: Proxmox
	// refuses it (--wait-for-proxmox: it runs on rather than fail at start),
	// and its errors are reported in its log and heartbeats.
	bad := startProc(t, "observer-wrong", "observer", "--nats", natsURL, "--cluster", "wrong",
		"--pve-url", sim.URL(), "--pve-token-id", tokenID, "--pve-token-secret-file", wrongFile, "--wait-for-proxmox",
		"--observe-interval", "200ms")
	eventually(t, 60*time.Second, "converge up ready", func() bool {
		res, err := http.Get("http://" + httpAddr + "/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == 200
	})
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := js.Publish(ctx, events.Subject(events.KindDesired, "pve", 101), []byte(`{"vmid":101,"power":"running","cores":3}`)); err != nil {
		t.Fatal(err)
	}
	if out, code := runCLI(t, "wait", "--nats", natsURL, "--timeout", "90s", "101"); code != 0 {
		t.Fatalf("wait: %d\n%s", code, out)
	}
	eventually(t, 60*time.Second, "the wrong secret refused in a heartbeat", func() bool {
		for _, m := range journalMessages(t, js) {
			if m.Subject == "pve.heartbeat.wrong" && strings.Contains(string(m.Data), `"reachable":false`) {
				return true
			}
		}
		return false
	})

	places := map[string]string{}
	for _, p := range []*proc{up, bad} {
		cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.cmd.Process.Pid), "cmdline"))
		if err != nil {
			t.Fatal(err)
		}
		places["cmdline of "+p.cmd.Args[1]] = string(cmdline)
	}
	places["/metrics"] = httpGet(t, "http://"+httpAddr+"/metrics")
	req, _ := http.NewRequest("GET", "http://"+httpAddr+"/v1/guests", nil)
	req.Header.Set("Authorization", "Bearer "+httpToken(t, data))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	places["/v1/guests"] = string(b)
	places["status"], _ = runCLI(t, "status", "--nats", natsURL, "-o", "json")
	places["status of the wrong cluster"], _ = runCLI(t, "status", "--nats", natsURL, "--cluster", "wrong", "-o", "json")
	var journal strings.Builder
	for _, m := range journalMessages(t, js) {
		journal.WriteString(m.Subject + " ")
		for k, vs := range m.Header {
			journal.WriteString(k + "=" + strings.Join(vs, ",") + " ")
		}
		journal.Write(m.Data)
		journal.WriteString("\n")
	}
	places["journal"] = journal.String()
	up.stop(syscall.SIGTERM, 15*time.Second)
	bad.stop(syscall.SIGTERM, 15*time.Second)
	for _, p := range []*proc{up, bad} {
		b, err := os.ReadFile(p.log)
		if err != nil {
			t.Fatal(err)
		}
		places["log of "+p.cmd.Args[1]] = string(b)
	}
	if !strings.Contains(places["log of observer"], "401") && !strings.Contains(strings.ToLower(places["log of observer"]), "authentication") {
		t.Fatalf("the wrong secret's refusal is not logged:\n%s", tail(places["log of observer"], 3000))
	}
	// The places looked at hold what they should: a converged guest, its
	// actions and results, the refusal.
	if !contains(places["status"], `"vmid": 101`, `"converged"`) || !contains(places["journal"], "pve.result.pve.101", `"succeeded"`) ||
		!contains(places["/metrics"], "converge_") || !contains(places["/v1/guests"], `"vmid": 101`) || !contains(places["cmdline of up"], secretFile) {
		t.Fatalf("nothing to look at: status %s\njournal %s", tail(places["status"], 500), tail(places["journal"], 500))
	}
	for where, text := range places {
		for _, s := range []string{secret, wrong} {
			if strings.Contains(text, s) {
				t.Errorf("%s shows a secret:\n%s", where, tail(text, 2000))
			}
		}
	}
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}
