package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/app"
	"github.com/converge-pve/converge/internal/pve"
)

// A plain-http Proxmox URL was accepted without a word: the API token (or
// password) and every ticket cross the network in clear. It is warned
// about now, except for `up`'s own simulator on loopback.
func TestPlainHTTPProxmoxWarns(t *testing.T) {
	cases := []struct {
		name, url  string
		builtinSim bool
		warn       bool
	}{
		{"plain http", "http://pve1.example.org:8006", false, true},
		{"plain http on loopback, not up's simulator", "http://127.0.0.1:8006", false, true},
		{"https", "https://pve1.example.org:8006", false, false},
		{"up's simulator on loopback", "http://127.0.0.1:8006/api2/json", true, false},
		{"up's simulator on localhost", "http://localhost:8006", true, false},
		{"up's simulator on every interface", "http://0.0.0.0:8006", true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			f := &roleFlags{pve: pve.Config{URL: c.url, TokenID: "converge@pve!t", TokenSecret: "s3cret"}, builtinSim: c.builtinSim}
			if _, err := f.pveClient(zerolog.New(&buf)); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			warned := strings.Contains(out, `"level":"warn"`) && strings.Contains(out, "in clear")
			if warned != c.warn {
				t.Fatalf("%s: warned %t, want %t; log:\n%s", c.url, warned, c.warn, out)
			}
			if strings.Contains(out, "s3cret") {
				t.Fatalf("the secret is logged:\n%s", out)
			}
		})
	}
}

// The Proxmox token secret on the command line was readable by every
// local user in /proc/PID/cmdline. It comes from a file now (or the
// environment); the command line still works, with a loud warning.
func TestPVETokenSecretFromFile(t *testing.T) {
	t.Setenv("PVE_TOKEN_SECRET", "")
	t.Setenv("PVE_TOKEN_SECRET_FILE", "")
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("s3cret-from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		warn bool
	}{
		{[]string{"--pve-token-secret-file", file}, false},
		{[]string{"--pve-token-secret", "s3cret-from-file"}, true},
	} {
		f := &roleFlags{}
		cmd := &cobra.Command{}
		addRoleFlags(cmd, f, "")
		args := append([]string{"--pve-url", "https://pve1.example.org:8006", "--pve-token-id", "converge@pve!t"}, c.args...)
		if err := cmd.Flags().Parse(args); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if _, err := f.pveClient(zerolog.New(&buf)); err != nil {
			t.Fatal(err)
		}
		if f.pve.TokenSecret != "s3cret-from-file" {
			t.Fatalf("%v: secret %q", c.args, f.pve.TokenSecret)
		}
		if warned := strings.Contains(buf.String(), "SECRET ON THE COMMAND LINE"); warned != c.warn {
			t.Fatalf("%v: warned %t; log:\n%s", c.args, warned, buf.String())
		}
		if strings.Contains(buf.String(), "s3cret-from-file") {
			t.Fatalf("the secret is logged:\n%s", buf.String())
		}
	}
}

// A role serving the HTTP API in signed mode signs what it accepts with
// --api-sign-key, as a planner trusting its public key verifies.
func TestAPISignKey(t *testing.T) {
	dir := t.TempDir()
	root := newRoot()
	root.SetOut(io.Discard)
	root.SetArgs([]string{"keygen", "--dir", dir, "--id", "portal-api"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	f := &roleFlags{apiSignKey: filepath.Join(dir, "portal-api.key")}
	sign, err := f.httpSign()
	if err != nil || sign == nil {
		t.Fatalf("httpSign: %v", err)
	}
	m, err := events.DesiredBodyMessage(101, []byte(`{"vmid":101}`), events.PublishOptions{Publisher: "token:portal"})
	if err != nil {
		t.Fatal(err)
	}
	if err := sign(&m); err != nil {
		t.Fatal(err)
	}
	keys, err := loadTrustedKeys(filepath.Join(dir, "portal-api.pub"))
	if err != nil {
		t.Fatal(err)
	}
	if sig, err := events.VerifySignature(m.Subject, m.Header, m.Data, keys); err != nil || sig.KeyID != "portal-api" {
		t.Fatalf("%+v %v", sig, err)
	}
}

// A guard flag given as 0 became its default without a word (the library
// reads a zero limit as "unset"): --guard-min 0 meant 5. It is an error
// now, naming the flag.
func TestZeroLimitFlagsRefused(t *testing.T) {
	for _, c := range []struct{ flag, want string }{
		{"--guard-min=0", "--guard-min must be >= 1"},
		{"--guard-share=0", "--guard-share must be within (0, 1]"},
		{"--guard-share=1.5", "--guard-share must be within (0, 1]"},
		{"--guard-window=0s", "--guard-window must be > 0"},
		{"--node-concurrency=0", "--node-concurrency must be >= 1"},
	} {
		f := &roleFlags{}
		cmd := &cobra.Command{Use: "x"}
		addRoleFlags(cmd, f, "")
		if err := cmd.ParseFlags([]string{c.flag}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.appConfig(&globals{}, app.Roles{Planner: true}, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.flag, err, c.want)
		}
	}
	f := &roleFlags{}
	cmd := &cobra.Command{Use: "x"}
	addRoleFlags(cmd, f, "")
	if err := cmd.ParseFlags([]string{"--node-concurrency=-1", "--guard-share=1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.appConfig(&globals{}, app.Roles{Planner: true}, zerolog.Nop()); err != nil {
		t.Errorf("no node limit and a share of 1: %v", err)
	}
}
