package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/natsauth"
	"github.com/converge-pve/converge/internal/natsserver"
)

// The README's `nats pub` example works against `converge up`'s embedded
// NATS, which admits only the users up generated (a bare `nats pub` got
// "Authorization Violation"): its shell line reads the publisher's
// password from where up writes it, and that user may publish the body,
// valid desired state, to the subject. The nats CLI itself is not run;
// its flags are those of docs/events.md.
func TestREADMENATSPubExample(t *testing.T) {
	for _, tool := range []string{"sh", "awk"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" { // CI has them: a missing one is a failure there
				t.Fatalf("%s: %v (install it: apt-get install -y %s)", tool, err, map[string]string{"sh": "dash", "awk": "gawk"}[tool])
			}
			t.Skipf("SKIPPED: %s: %v", tool, err)
		}
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var block string
	for _, b := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(string(readme), -1) {
		if strings.Contains(b[1], " pub pve.desired.") {
			block = strings.ReplaceAll(b[1], "\\\n", " ")
		}
	}
	if block == "" {
		t.Fatal("README.md: no sh block with `nats … pub pve.desired.…`")
	}
	var pwLine, pubLine string
	for _, l := range strings.Split(block, "\n") {
		switch l = strings.TrimSpace(l); {
		case strings.HasPrefix(l, "PW="):
			pwLine = l
		case strings.HasPrefix(l, "nats "):
			pubLine = l
		}
	}
	pub := regexp.MustCompile(`^nats --server (\S+) --user (\S+) --password "\$PW"\s+pub (pve\.desired\.([a-z0-9-]+)\.(\d+)) '([^']*)'`).FindStringSubmatch(pubLine)
	if pwLine == "" || pub == nil {
		t.Fatalf("README.md: want a PW=… line and `nats --server URL --user USER --password \"$PW\" pub SUBJECT 'BODY'`, got:\n%s", block)
	}
	server, user, subject, body := pub[1], pub[2], pub[3], pub[6]
	if server != "nats://"+defaultNATSListen {
		t.Errorf("--server %s, want up's default nats://%s", server, defaultNATSListen)
	}
	vmid, _ := strconv.Atoi(pub[5])
	if _, err := events.DecodeDesired([]byte(body), vmid); err != nil {
		t.Errorf("body %s: %v", body, err)
	}

	// The shell line, where up keeps its data by default.
	dir := t.TempDir()
	creds, _, err := natsauth.LoadOrCreate(filepath.Join(dir, defaultData))
	if err != nil {
		t.Fatal(err)
	}
	sh := exec.Command("sh", "-c", pwLine+`; printf %s "$PW"`)
	sh.Dir = dir
	pw, err := sh.Output()
	if err != nil || string(pw) != creds[natsauth.Role(user)] || len(pw) < 16 {
		t.Fatalf("%s: got %d bytes (%v), want %s's password", pwLine, len(pw), err, user)
	}

	// up's embedded server, as up configures it.
	srv, err := natsserver.Start(natsserver.Options{DataDir: t.TempDir(), Listen: "127.0.0.1:-1", Users: creds.Users(natsauth.Names{})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	if nc, err := nats.Connect(srv.ClientURL()); err == nil {
		nc.Close()
		t.Fatal("up's NATS admits a client without credentials")
	}
	admin, err := nats.Connect(srv.ClientURL(), nats.UserInfo(string(natsauth.Admin), creds[natsauth.Admin]))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	sub, err := admin.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.Flush(); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo(user, string(pw)))
	if err != nil {
		t.Fatalf("user %s with the README's password: %v", user, err)
	}
	defer nc.Close()
	if err := nc.Publish(subject, []byte(body)); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	// A publish NATS refuses never arrives.
	if m, err := sub.NextMsg(10 * time.Second); err != nil || string(m.Data) != body {
		t.Fatalf("user %s may not publish to %s: %v", user, subject, err)
	}
}
