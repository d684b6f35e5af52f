package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/projector"
)

// `converge --help` documents the exit codes; version and --version say
// the build.
func TestHelpAndVersion(t *testing.T) {
	clearEnv(t)
	out, err := run(t, "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"Exit codes:", "2    usage", "3    wait: timed out", "CONVERGE_<FLAG>"} {
		if !strings.Contains(out, w) {
			t.Errorf("--help does not say %q:\n%s", w, out)
		}
	}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, err := run(t, args...)
		if err != nil || !strings.Contains(out, "go1.") {
			t.Errorf("%v: %v %q", args, err, out)
		}
	}
}

// Bad arguments and flags exit 2, before anything is dialled.
func TestUsageErrorsExit2(t *testing.T) {
	clearEnv(t)
	for _, args := range [][]string{
		{"wait"}, {"wait", "101", "--all"}, {"wait", "--all", "-f", "x.yaml"}, {"wait", "abc"},
		{"status", "--state", "sleeping"}, {"status", "--no-such-flag"}, {"no-such-command"},
		{"wait", "-f", "/nonexistent/guests.yaml"},
		// Each command's own argument and flag checks, before it dials NATS.
		{"desire", "101", "--power", "sideways"}, {"desire", "abc"}, {"desire", "101", "--disk", "scsi0=abc"},
		{"desire", "101", "--clone-node", "pve2"}, {"desire", "-f", "/nonexistent/guests.yaml"},
		{"desire", "-f", writeConfig(t, "- {vmid: 101, power: sideways}\n")},
		{"desire", "101", "--cores", "2", "--sign-key", "/nonexistent/key.pem"},
		{"history", "101", "--since", "banana"}, {"history", "abc"},
		{"desire", "101", "--prune"}, {"desire", "101", "--move"}, {"desire", "101", "--set", "web", "--prune"},
		{"desire", "101", "--set", "Web"}, {"desire", "-f", writeConfig(t, "- {vmid: 101}\n"), "--set", "web-"},
		{"rollback", "101"}, {"rollback", "101", "--to", "5", "--to-time", "1h"}, {"rollback", "abc", "--to", "5"},
		{"rollback", "101", "--to-time", "banana"},
		{"approve"}, {"approve", "abc"}, {"pause"}, {"release", "x"},
		{"replay", "--until", "banana"}, {"keygen", "--id", "a/b"},
		{"sim", "--token", "nosecret"}, {"nats-node"}, {"nats-node", "--store", t.TempDir(), "--routes", "nats://127.0.0.1:1"},
		{"planner", "--nats", "nats://127.0.0.1:1", "--require-signed"},
		{"notify"}, {"notify", "--notify-config", "/nonexistent/notify.yaml"},
		{"notify", "--notify-config", writeConfig(t, "routes:\n- {name: a, url: ftp://x}\n")},
		{"up", "--notify-config", writeConfig(t, "routes: []\n")},
	} {
		_, err := run(t, args...)
		if code := codeOf(err); code != exitUsage {
			t.Errorf("%v: exit %d (%v), want %d", args, code, err, exitUsage)
		}
	}
}

// wait -f waits for the guests of a desired file, in the format of desire -f.
func TestWaitFileVMIDs(t *testing.T) {
	p := writeConfig(t, "guests:\n  - {vmid: 101, power: running}\n  - {vmid: 105, cores: 2}\n  - {vmid: 101, power: running}\n")
	ids, err := fileVMIDs(p)
	if err != nil || len(ids) != 2 || ids[0] != 101 || ids[1] != 105 {
		t.Fatalf("%v %v", ids, err)
	}
	if _, err := fileVMIDs(writeConfig(t, "- {vmid: 101, power: sideways}\n")); err == nil || !strings.Contains(err.Error(), "entry 1") {
		t.Fatalf("an invalid entry: %v", err)
	}
}

// status shows kind, name and tags (as observed, else as desired) and
// filters by state.
func TestStatusKindNameTagsAndStateFilter(t *testing.T) {
	now := time.Now()
	cd := &views.ClusterDoc{State: projector.ClusterState{Reachable: true, HeartbeatAt: now}}
	name, tags := "db1", []string{"prod", "db"}
	sums := []views.Summary{
		{VMID: 100, State: "converged", Observed: &views.ObservedSummary{Exists: true, Kind: events.LXC,
			Config: events.GuestConfig{Name: "web1", Tags: []string{"web"}}}},
		{VMID: 101, State: "pending", Desired: &events.Desired{Name: &name, Tags: &tags}},
	}
	var b strings.Builder
	printStatus(&b, sums, cd, now)
	out := b.String()
	for _, w := range []string{"KIND", "NAME", "TAGS", "lxc", "web1", "web", "db1", "prod,db"} {
		if !strings.Contains(out, w) {
			t.Errorf("no %q in\n%s", w, out)
		}
	}
	keep, err := stateFilter([]string{"pending", "error"})
	if err != nil || !keep["pending"] || !keep["error"] || keep["converged"] {
		t.Fatalf("%v %v", keep, err)
	}
	if _, err := stateFilter([]string{"sleeping"}); err == nil || !strings.Contains(err.Error(), "converged") {
		t.Fatalf("unknown state: %v", err)
	}
}

// The shell completes the enum flags' values.
func TestCompletesEnumValues(t *testing.T) {
	clearEnv(t)
	for args, want := range map[string]string{
		"desire 101 --power ":   "running",
		"desire 101 --restart ": "allowed",
		"desire 101 --kind ":    "lxc",
		"status --state ":       "pending",
		"up --log-format ":      "console",
	} {
		a := append([]string{"__complete"}, strings.Fields(args)...)
		out, err := run(t, append(a, "")...)
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("%q: %v\n%s", args, err, out)
		}
	}
}

// pflag reads a backtick-quoted word in a flag's usage as the name of its
// value ("--data converge up"): no usage has one.
func TestNoBacktickInFlagUsage(t *testing.T) {
	clearEnv(t)
	root := newRoot()
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		check := func(f *pflag.Flag) {
			if strings.Contains(f.Usage, "`") {
				t.Errorf("%s --%s: usage has a backtick: %s", c.CommandPath(), f.Name, f.Usage)
			}
		}
		c.Flags().VisitAll(check)
		c.PersistentFlags().VisitAll(check)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// Durations are logged in seconds, as floats: "window":300, not 300000.
func TestLogDurationsInSeconds(t *testing.T) {
	g := &globals{logLevel: "info", logFormat: "json"}
	if _, err := g.logger(); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	l := zerolog.New(&b)
	l.Info().Dur("window", 5*time.Minute).Dur("retry_in", 250*time.Millisecond).Msg("")
	if out := b.String(); !strings.Contains(out, `"window":300`) || strings.Contains(out, "300000") || !strings.Contains(out, `"retry_in":0.25`) {
		t.Fatalf("durations not in seconds: %s", out)
	}
}

// NATS refusing the credentials says which were used and how to give
// others: a wrong password said only "Authorization Violation".
func TestNATSAuthHint(t *testing.T) {
	refused := errors.New("bus: connect nats://127.0.0.1:4222: nats: Authorization Violation")
	for _, c := range []struct {
		g    globals
		want []string
	}{
		{globals{natsUser: "ops", data: t.TempDir()}, []string{`user "ops"`, "--nats-password-file", "CONVERGE_NATS_PASSWORD", "--data"}},
		{globals{natsCred: "/etc/x.creds", data: t.TempDir()}, []string{"/etc/x.creds", "--nats-creds"}},
		{globals{data: "/nonexistent"}, []string{"no credentials", "--nats-user", "CONVERGE_NATS_USER", "--data DIR"}},
	} {
		err := c.g.natsAuthHint(refused)
		if !errors.Is(err, refused) {
			t.Fatalf("%v does not wrap the refusal", err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q does not say %q", err, w)
			}
		}
	}
	other := errors.New("nats: no servers available for connection")
	if err := (&globals{}).natsAuthHint(other); err != other {
		t.Fatalf("%v", err)
	}
}
