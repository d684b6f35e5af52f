package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
			pc := pve.DefaultConfig()
			pc.URL, pc.TokenID, pc.TokenSecret = c.url, "converge@pve!t", "s3cret"
			if _, err := (app.Setup{Proxmox: pc, BuiltinSim: c.builtinSim}).Client(zerolog.New(&buf)); err != nil {
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
		if err := f.proxmox(zerolog.New(&buf)); err != nil {
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
// reads a zero limit as "unset"): --guard-min 0 meant 5. So did
// --executor-concurrency, --node-rate, --ack-wait and --lease-ttl (issue
// 35). Each is an error now, naming the flag.
func TestZeroLimitFlagsRefused(t *testing.T) {
	for _, c := range []struct{ flag, want string }{
		{"--guard-min=0", flagRef("guard-min") + ": must be >= 1"},
		{"--guard-share=0", flagRef("guard-share") + ": must be within (0, 1]"},
		{"--guard-share=NaN", flagRef("guard-share") + ": must be within (0, 1]"},
		{"--guard-share=1.5", flagRef("guard-share") + ": must be within (0, 1], got 1.5"},
		{"--guard-window=0s", flagRef("guard-window") + ": must be > 0"},
		{"--node-concurrency=0", flagRef("node-concurrency") + ": must be >= 1"},
		{"--executor-concurrency=0", flagRef("executor-concurrency") + ": must be >= 1"},
		{"--node-rate=0", flagRef("node-rate") + ": must be > 0"},
		{"--ack-wait=0s", flagRef("ack-wait") + ": must be at least"},
		{"--lease-ttl=0s", flagRef("lease-ttl") + ": must be at least"},
		{"--checkpoint-interval=0s", flagRef("checkpoint-interval") + ": must be > 0 (or off)"},
		{"--create-rate=0", flagRef("create-rate") + ": must be >= 1 (or unlimited)"},
		{"--shutdown-timeout=0s", flagRef("shutdown-timeout") + ": must be >= 1s"},
		{"--resync-interval=0s", flagRef("resync-interval") + ": must be > 0"},
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
	if err := cmd.ParseFlags([]string{"--node-concurrency=unlimited", "--guard-share=1", "--node-rate=unlimited", "--checkpoint-interval=off",
		"--config-refresh=off", "--clone-concurrency=unlimited", "--create-rate=unlimited"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := f.appConfig(&globals{}, app.Roles{Planner: true}, zerolog.Nop())
	if err != nil {
		t.Fatalf("no node limit, a share of 1, no node rate, no checkpoints, no verification: %v", err)
	}
	l := cfg.Planner.Planner.Limits
	if !l.NodeConcurrencyUnlimited || !l.CloneConcurrencyUnlimited || !l.CreateRateUnlimited || !cfg.Executor.NodeRateUnlimited ||
		!cfg.Planner.Planner.CheckpointOff || !cfg.Observer.VerifyOff || len(f.deprecated) != 0 {
		t.Fatalf("keywords not taken: %+v, node rate unlimited %t, checkpoints off %t, verification off %t, deprecated %q",
			l, cfg.Executor.NodeRateUnlimited, cfg.Planner.Planner.CheckpointOff, cfg.Observer.VerifyOff, f.deprecated)
	}
}

// The negative values that said "none" before the keywords still do, each
// noted for a warning that names its keyword.
func TestNegativeSentinelsStillAccepted(t *testing.T) {
	f := &roleFlags{}
	cmd := &cobra.Command{Use: "x"}
	addRoleFlags(cmd, f, "")
	if err := cmd.ParseFlags([]string{"--node-concurrency=-1", "--node-rate=-1", "--checkpoint-interval=-1s",
		"--config-refresh=-1s", "--clone-concurrency=-1", "--create-rate=-1"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := f.appConfig(&globals{}, app.Roles{Planner: true}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	l := cfg.Planner.Planner.Limits
	if !l.NodeConcurrencyUnlimited || !l.CloneConcurrencyUnlimited || !l.CreateRateUnlimited || !cfg.Executor.NodeRateUnlimited ||
		!cfg.Planner.Planner.CheckpointOff || !cfg.Observer.VerifyOff {
		t.Fatalf("a negative value no longer means none: %+v %+v", l, cfg)
	}
	want := []string{"--node-concurrency unlimited", "--node-rate unlimited", "--checkpoint-interval off", "--config-refresh off",
		"--clone-concurrency unlimited", "--create-rate unlimited"}
	if len(f.deprecated) != len(want) {
		t.Fatalf("warnings %q, want one per flag", f.deprecated)
	}
	for i, w := range want {
		if !strings.Contains(f.deprecated[i], "deprecated, give "+w) {
			t.Errorf("warning %q does not name %q", f.deprecated[i], w)
		}
	}
}

// Role settings the packages check deep in start-up are checked before
// anything starts: up (which would start the simulator and NATS first)
// and config print refuse them, exit 2, naming the flag and its variable.
func TestRoleSettingsValidatedFirst(t *testing.T) {
	for _, c := range []struct{ env, value, flag string }{
		{"CONVERGE_GUARD_SHARE", "2", "guard-share"},
		{"CONVERGE_RESTART", "sometimes", "restart"},
		{"CONVERGE_RESTART_WINDOW", "Funday", "restart-window"},
		{"CONVERGE_HTTP", "nonsense", "http"},
		{"CONVERGE_ACK_WAIT", "1ms", "ack-wait"},
		{"CONVERGE_LEASE_TTL", "1ms", "lease-ttl"},
		{"CONVERGE_EXECUTOR_CONCURRENCY", "-1", "executor-concurrency"},
		{"CONVERGE_SNAPSHOT_KEEP", "-1", "snapshot-keep"},
		{"CONVERGE_SHUTDOWN_TIMEOUT", "10ms", "shutdown-timeout"},
		{"CONVERGE_OBSERVE_INTERVAL", "-1s", "observe-interval"},
		{"CONVERGE_VERIFY_RATE", "-1", "verify-rate"},
		{"CONVERGE_OBSERVED_RETENTION", "5s", "observed-retention"},
		{"CONVERGE_HTTP_TLS_CERT", "/x.pem", "http-tls-cert"},
		{"CONVERGE_NATS_LISTEN", "4222", "nats-listen"},
		{"CONVERGE_SIM_TOKEN", "nosecret", "sim-token"},
	} {
		for _, args := range [][]string{{"up", "--data", t.TempDir(), "--sim-listen", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0"},
			{"config", "print"}, {"executor", "--nats", "nats://127.0.0.1:1"}} {
			if args[0] == "executor" && strings.HasPrefix(c.flag, "nats-") || strings.HasPrefix(c.flag, "sim-") && args[0] == "executor" {
				continue
			}
			if c.flag == "nats-listen" && args[0] == "up" {
				args = args[:len(args)-2]
			}
			t.Run(c.env+"/"+args[0], func(t *testing.T) {
				clearEnv(t)
				t.Setenv(c.env, c.value)
				out, err := run(t, args...)
				if code := codeOf(err); code != exitUsage || !strings.Contains(err.Error(), flagRef(c.flag)) {
					t.Fatalf("exit %d: %v, want %d naming %s\n%s", code, err, exitUsage, flagRef(c.flag), out)
				}
				if strings.Contains(out, "simulator") {
					t.Fatalf("the simulator started first:\n%s", out)
				}
			})
		}
	}
}

// --config-refresh 0 meant "the observe interval" before 0 was a value:
// it still does, with a warning to leave the flag out, and an unset flag
// shows no value of its own (it follows --observe-interval).
func TestConfigRefreshZeroFollowsTheInterval(t *testing.T) {
	f := &roleFlags{}
	cmd := &cobra.Command{Use: "x"}
	addRoleFlags(cmd, f, "")
	if got := cmd.Flags().Lookup("config-refresh").DefValue; got != "" {
		t.Errorf("shown default %q, want none (it follows --observe-interval)", got)
	}
	if err := cmd.ParseFlags([]string{"--config-refresh=0s", "--observe-interval=45s"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := f.appConfig(&globals{}, app.Roles{Observer: true}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Observer.ConfigRefresh != 45*time.Second || cfg.Observer.VerifyOff {
		t.Errorf("config refresh %s (off %t), want the observe interval, 45s", cfg.Observer.ConfigRefresh, cfg.Observer.VerifyOff)
	}
	if len(f.deprecated) != 1 || !strings.Contains(f.deprecated[0], "--config-refresh 0s: 0 is deprecated") {
		t.Errorf("warnings %q, want one for --config-refresh 0s", f.deprecated)
	}
}
