package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// run runs the converge command tree in-process with args, returning its
// output and error.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

// clearEnv unsets every variable that could set a flag, for the test.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "CONVERGE_") || strings.HasPrefix(k, "PVE_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
}

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "converge.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// printed runs config print and returns each key's value and source.
func printed(t *testing.T, args ...string) map[string]setting {
	t.Helper()
	out, err := run(t, append([]string{"config", "print"}, args...)...)
	if err != nil {
		t.Fatalf("config print %v: %v\n%s", args, err, out)
	}
	var doc struct{ Settings []setting }
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	m := map[string]setting{}
	for _, s := range doc.Settings {
		m[s.Key] = s
	}
	return m
}

// A setting comes from the command line, else the environment, else the
// --config file, else the default; each source is reported.
func TestConfigPrecedence(t *testing.T) {
	clearEnv(t)
	cfg := writeConfig(t, "cluster: fromfile\nobserve-interval: 7s\nexecutor-concurrency: 9\nreplicas: 3\nhttp-host: [a.example, b.example]\n")
	t.Setenv("CONVERGE_OBSERVE_INTERVAL", "8s")
	t.Setenv("CONVERGE_EXECUTOR_CONCURRENCY", "11")
	t.Setenv("PVE_URL", "https://old-name:8006") // the older variable still works
	m := printed(t, "up", "--config", cfg, "--executor-concurrency", "12", "-o", "json")
	want := map[string][2]string{
		"executor-concurrency": {"12", "flag"},
		"observe-interval":     {"8s", "env CONVERGE_OBSERVE_INTERVAL"},
		"cluster":              {"fromfile", "file " + cfg},
		"replicas":             {"3", "file " + cfg},
		"http-host":            {"[a.example,b.example]", "file " + cfg},
		"pve-url":              {"https://old-name:8006", "env PVE_URL"},
		"lease-ttl":            {"5s", "default"},
	}
	for k, w := range want {
		if got := m[k]; got.Value != w[0] || got.Source != w[1] {
			t.Errorf("%s = %q from %q, want %q from %q", k, got.Value, got.Source, w[0], w[1])
		}
	}
	if m["observe-interval"].Env != "CONVERGE_OBSERVE_INTERVAL" {
		t.Errorf("observe-interval's variable: %q", m["observe-interval"].Env)
	}
	// The preferred variable wins over the older one.
	t.Setenv("CONVERGE_PVE_URL", "https://new-name:8006")
	if got := printed(t, "up", "-o", "json")["pve-url"]; got.Value != "https://new-name:8006" || got.Source != "env CONVERGE_PVE_URL" {
		t.Errorf("pve-url = %+v", got)
	}
}

// `up` runs its embedded NATS unless --nats is on its own command line:
// CONVERGE_NATS_URL, meant for the CLI, does not switch it.
func TestUpIgnoresNATSURLFromEnv(t *testing.T) {
	clearEnv(t)
	t.Setenv("CONVERGE_NATS_URL", "nats://elsewhere:4222")
	if got := printed(t, "up", "-o", "json")["nats"]; got.Value != "" || got.Source != "default" {
		t.Errorf("up's nats = %+v, want unset", got)
	}
	if got := printed(t, "observer", "-o", "json")["nats"]; got.Value != "nats://elsewhere:4222" || got.Source != "env CONVERGE_NATS_URL" {
		t.Errorf("observer's nats = %+v", got)
	}
	if got := printed(t, "up", "--nats", "nats://there:4222", "-o", "json")["nats"]; got.Source != "flag" {
		t.Errorf("up --nats = %+v", got)
	}
}

// Secrets are masked, wherever they come from; the files naming them are not.
func TestConfigPrintMasksSecrets(t *testing.T) {
	clearEnv(t)
	t.Setenv("CONVERGE_PVE_TOKEN_SECRET", "s3cret-from-env")
	cfg := writeConfig(t, "nats-password: s3cret-from-file\nnats-password-file: /etc/converge/nats.pass\n")
	for _, o := range []string{"text", "json"} {
		out, err := run(t, "config", "print", "up", "--config", cfg, "--sim-token", "root@pam!x=s3cret-on-line", "-o", o)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out, "s3cret") {
			t.Fatalf("-o %s shows a secret:\n%s", o, out)
		}
		for _, w := range []string{"pve-token-secret", "******", "/etc/converge/nats.pass", "env CONVERGE_PVE_TOKEN_SECRET"} {
			if !strings.Contains(out, w) {
				t.Errorf("-o %s: no %q in\n%s", o, w, out)
			}
		}
	}
}

// Bad settings are refused before anything runs, with exit status 2 and
// a message naming the flag and its variable (never a Go field).
func TestConfigValidationNamesFlags(t *testing.T) {
	clearEnv(t)
	cases := []struct {
		name string
		env  map[string]string
		file string
		args []string
		want []string
	}{
		{"replicas from env", map[string]string{"CONVERGE_REPLICAS": "7"}, "", []string{"config", "print"},
			[]string{"--replicas (or CONVERGE_REPLICAS)", "1..5", "7"}},
		{"not a number in env", map[string]string{"CONVERGE_REPLICAS": "three"}, "", []string{"config", "print"},
			[]string{"CONVERGE_REPLICAS=\"three\"", "--replicas"}},
		{"not a duration in the file", nil, "observe-interval: soon\n", []string{"config", "print"},
			[]string{"observe-interval", "duration"}},
		{"unknown key", nil, "pve_url: x\n", []string{"config", "print"}, []string{`unknown key(s) "pve_url"`, "long flag names"}},
		{"log format", map[string]string{"CONVERGE_LOG_FORMAT": "xml"}, "", []string{"config", "print"},
			[]string{"--log-format (or CONVERGE_LOG_FORMAT)", "json, console or auto"}},
		{"no credentials", map[string]string{"CONVERGE_PVE_URL": "https://pve1:8006"}, "", []string{"observer", "--nats", "nats://127.0.0.1:1"},
			[]string{"no Proxmox credentials: give --pve-token-id and --pve-token-secret (or CONVERGE_PVE_TOKEN_ID / CONVERGE_PVE_TOKEN_SECRET"}},
		{"no secret", map[string]string{"CONVERGE_PVE_URL": "https://pve1:8006", "CONVERGE_PVE_TOKEN_ID": "c@pve!c"}, "", []string{"executor", "--nats", "nats://127.0.0.1:1"},
			[]string{"--pve-token-secret (or CONVERGE_PVE_TOKEN_SECRET)"}},
		{"bad token id", nil, "pve-url: https://pve1:8006\npve-token-id: converge\npve-token-secret: x\n", []string{"observer", "--nats", "nats://127.0.0.1:1"},
			[]string{"--pve-token-id (or CONVERGE_PVE_TOKEN_ID)", "user@realm!name"}},
		{"bad url", nil, "pve-url: ftp://pve1\npve-token-id: c@pve!c\npve-token-secret: x\n", []string{"observer", "--nats", "nats://127.0.0.1:1"},
			[]string{"--pve-url (or CONVERGE_PVE_URL)"}},
		{"role without NATS", nil, "", []string{"planner"}, []string{"--nats (or CONVERGE_NATS)"}},
		// The client is built after the flags are checked; what it finds
		// wrong still names the flag.
		{"CA file without a certificate", nil, "pve-url: https://pve1:8006\npve-token-id: c@pve!c\npve-token-secret: x\npve-ca: " + os.DevNull + "\n",
			[]string{"observer", "--nats", "nats://127.0.0.1:1"}, []string{"--pve-ca (or CONVERGE_PVE_CA)", "holds no PEM certificate"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			args := c.args
			if c.file != "" {
				args = append(args, "--config", writeConfig(t, c.file))
			}
			out, err := run(t, args...)
			if err == nil {
				t.Fatalf("accepted:\n%s", out)
			}
			if code := codeOf(err); code != exitUsage {
				t.Errorf("exit status %d, want %d", code, exitUsage)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "pve.Config") || strings.Contains(err.Error(), "TokenID") {
				t.Errorf("%q names a Go field", err)
			}
		})
	}
}

// Every configurable flag's help names its variable.
func TestEveryFlagNamesItsVariable(t *testing.T) {
	root := newRoot()
	for _, name := range []string{"up", "observer", "sim"} {
		cmd, _, err := root.Find([]string{name})
		if err != nil {
			t.Fatal(err)
		}
		_ = cmd.ParseFlags(nil)
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			if fromEnvOrFile(cmd, f) && !strings.Contains(f.Usage, envName(f.Name)) {
				t.Errorf("%s --%s: usage %q does not name %s", name, f.Name, f.Usage, envName(f.Name))
			}
		})
	}
}
