package deploy_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/natsauth"
)

// unitFile is a systemd unit: section -> key -> values, in order (a key
// may be given more than once).
type unitFile map[string]map[string][]string

func parseUnit(t *testing.T, path string) unitFile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u := unitFile{}
	section := ""
	lines := strings.Split(string(b), "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		for strings.HasSuffix(line, `\`) && i+1 < len(lines) { // continuation
			i++
			line = strings.TrimSuffix(line, `\`) + " " + strings.TrimSpace(lines[i])
		}
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[' && line[len(line)-1] == ']':
			section = line[1 : len(line)-1]
			if u[section] == nil {
				u[section] = map[string][]string{}
			}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: not key=value in a section: %q", path, i+1, line)
			}
			u[section][strings.TrimSpace(k)] = append(u[section][strings.TrimSpace(k)], strings.TrimSpace(v))
		}
	}
	return u
}

func (u unitFile) last(section, key string) string {
	v := u[section][key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// TestSystemdUnits checks every unit in systemd/: the hardening, the user,
// the env files, a stop timeout that lets executors drain, and that
// ExecStart runs a converge command with flags it has.
func TestSystemdUnits(t *testing.T) {
	units, _ := filepath.Glob("systemd/*.service")
	want := []string{"converge-executor@.service", "converge-observer.service", "converge-planner.service", "converge-up.service"}
	for _, w := range want {
		if !fileExists(filepath.Join("systemd", w)) {
			t.Errorf("no systemd/%s", w)
		}
	}
	sysusers, err := os.ReadFile("systemd/converge.sysusers.conf")
	if err != nil || !regexp.MustCompile(`(?m)^u\s+converge\s`).Match(sysusers) {
		t.Errorf("systemd/converge.sysusers.conf does not declare the user converge (%v)", err)
	}
	hardening := map[string]string{
		"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
		"PrivateDevices": "yes", "ProtectKernelTunables": "yes", "ProtectKernelModules": "yes",
		"ProtectControlGroups": "yes", "RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX",
		"LockPersonality": "yes", "MemoryDenyWriteExecute": "yes", "StateDirectory": "converge",
		"Restart": "on-failure", "KillSignal": "SIGTERM",
	}
	for _, path := range units {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			u := parseUnit(t, path)
			svc := u["Service"]
			if svc == nil || u["Unit"] == nil || u["Install"] == nil {
				t.Fatalf("want [Unit], [Service] and [Install], got %v", u)
			}
			for k, v := range hardening {
				if got := u.last("Service", k); got != v {
					t.Errorf("%s=%q, want %q", k, got, v)
				}
			}
			if u.last("Service", "User") != "converge" && u.last("Service", "DynamicUser") != "yes" {
				t.Errorf("neither User=converge nor DynamicUser=yes")
			}
			if f := svc["SystemCallFilter"]; len(f) == 0 || f[0] != "@system-service" {
				t.Errorf("SystemCallFilter=%v, want @system-service first", f)
			}
			// A usage error (exit 2, docs/exit-codes.md) fails again on every
			// restart: a unit that restarts must not retry it for ever.
			if r := u.last("Service", "Restart"); r != "" && r != "no" &&
				!slices.Contains(strings.Fields(strings.Join(svc["RestartPreventExitStatus"], " ")), "2") {
				t.Errorf("Restart=%s without RestartPreventExitStatus=2: a usage error restarts every %s for ever", r, u.last("Service", "RestartSec"))
			}
			// The role's command: converge-<role>[@].service.
			role := strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(name, "converge-"), ".service"), "@")
			stop, err := time.ParseDuration(u.last("Service", "TimeoutStopSec"))
			if err != nil {
				t.Errorf("TimeoutStopSec: %v", err)
			}
			// An executor drains in-flight actions for up to 60 s, then
			// releases its leases (5 s).
			if (role == "executor" || role == "up") && stop < 75*time.Second {
				t.Errorf("TimeoutStopSec=%v: an executor drains for up to 65 s", stop)
			}
			envFiles := svc["EnvironmentFile"]
			if len(envFiles) == 0 {
				t.Error("no EnvironmentFile=")
			}
			exec := strings.Fields(u.last("Service", "ExecStart"))
			if len(exec) < 2 || filepath.Base(exec[0]) != "converge" || exec[1] != role {
				t.Fatalf("ExecStart=%v, want converge %s …", exec, role)
			}
			checkFlags(t, name+" ExecStart", role, exec[2:])
			unitVars := map[string]bool{}
			for _, m := range regexp.MustCompile(`\$\{?([A-Z_][A-Z0-9_]*)\}?`).FindAllStringSubmatch(strings.Join(exec, " "), -1) {
				unitVars[m[1]] = true
			}
			for _, e := range svc["Environment"] {
				k, _, _ := strings.Cut(e, "=")
				unitVars[k] = true
			}
			h := help(t, role)
			// Every env file has an example; its variables are ones converge
			// reads or the unit's own, and its *_ARGS hold real flags.
			for _, f := range envFiles {
				if !strings.HasPrefix(f, "-/etc/converge/") {
					t.Errorf("EnvironmentFile=%s, want an optional file (-) in /etc/converge", f)
					continue
				}
				example := filepath.Join("systemd", strings.ReplaceAll(strings.TrimSuffix(filepath.Base(f), ".env"), "%i", "1")+".env.example")
				if !fileExists(example) {
					t.Errorf("EnvironmentFile=%s has no example %s", f, example)
					continue
				}
				for k, v := range readEnvFile(t, example) {
					if !h.env[k] && !unitVars[k] {
						t.Errorf("%s: %s is neither an environment variable of converge %s nor one of the unit's", example, k, role)
					}
					if strings.HasSuffix(k, "_ARGS") {
						checkFlags(t, example+" "+k, role, strings.Fields(v))
					}
					if strings.HasSuffix(k, "_FILE") && !strings.HasPrefix(v, "/etc/converge/") {
						t.Errorf("%s: %s=%s, want a secret file in /etc/converge", example, k, v)
					}
				}
			}
		})
	}
}

// TestSecretFileNames checks that the NATS password files the systemd
// examples name (CONVERGE_NATS_PASSWORD_FILE beside CONVERGE_NATS_USER)
// follow one naming scheme, and that nats/README.md and README.md name
// each role's file the same way: an operator following either must end
// up with the files the units read.
func TestSecretFileNames(t *testing.T) {
	examples, _ := filepath.Glob("systemd/*.env.example")
	scheme := "" // the path with the user replaced by {user}
	for _, path := range examples {
		env := readEnvFile(t, path)
		user, file := env["CONVERGE_NATS_USER"], env["CONVERGE_NATS_PASSWORD_FILE"]
		if user == "" || file == "" {
			continue
		}
		if !strings.Contains(file, user) {
			t.Errorf("%s: CONVERGE_NATS_PASSWORD_FILE=%s does not name its user %s", path, file, user)
			continue
		}
		s := strings.Replace(file, user, "{user}", 1)
		if scheme == "" {
			scheme = s
		} else if s != scheme {
			t.Errorf("%s: CONVERGE_NATS_PASSWORD_FILE=%s; another example names its file %s", path, file, strings.ReplaceAll(scheme, "{user}", user))
		}
	}
	if scheme == "" {
		t.Fatal("no systemd/*.env.example names a NATS user and its password file")
	}
	want := func(user string) string { return strings.ReplaceAll(scheme, "{user}", user) }

	b, err := os.ReadFile("nats/README.md")
	if err != nil {
		t.Fatal(err)
	}
	flags := regexp.MustCompile(`--nats-user\s+(\S+)\s+--nats-password-file\s+(\S+)`).FindAllStringSubmatch(string(b), -1)
	if len(flags) == 0 {
		t.Fatal("nats/README.md: no --nats-user … --nats-password-file … found")
	}
	for _, m := range flags {
		if m[2] != want(m[1]) {
			t.Errorf("nats/README.md: user %s's password file is %s; the systemd examples name it %s", m[1], m[2], want(m[1]))
		}
	}

	// README.md's install steps name the files by path alone.
	b, err = os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(scheme) + "/"
	for _, p := range regexp.MustCompile(regexp.QuoteMeta(dir)+`nats-[^\s)`+"`"+`"']+`).FindAllString(string(b), -1) {
		for _, r := range natsauth.Roles {
			if strings.HasPrefix(p, dir+"nats-"+string(r)) && p != want(string(r)) {
				t.Errorf("README.md: %s; the systemd examples name %s's password file %s", p, r, want(string(r)))
			}
		}
	}
}
