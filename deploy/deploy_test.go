// Package deploy_test checks the deployment material of this directory
// against the code it deploys: the nats-server configurations are loaded by
// nats-server's own parser and started, and every converge flag used by the
// compose file, the systemd units and their example env files is one the
// converge binary (built once, here) accepts.
package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildBin  string
	buildErr  error
	buildOut  []byte
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// goTool is the go command that runs this test.
func goTool() string {
	// The go command of the toolchain that built this test, if it is
	// there (GOROOT as `go env` tells it), else the one on PATH.
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		if p := filepath.Join(strings.TrimSpace(string(out)), "bin", "go"); fileExists(p) {
			return p
		}
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// converge builds ./cmd/converge once per test binary run and returns it.
func converge(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "converge-deploy-test-")
		if buildErr != nil {
			return
		}
		buildBin = filepath.Join(buildDir, "converge")
		cmd := exec.Command(goTool(), "build", "-o", buildBin, "./cmd/converge")
		cmd.Dir = ".." // the module root
		buildOut, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("go build ./cmd/converge: %v\n%s", buildErr, buildOut)
	}
	return buildBin
}

// commandHelp is what `converge <command> --help` knows about a command:
// its flags (its own and the global ones) and the environment variables
// its help names.
type commandHelp struct {
	flags map[string]bool
	env   map[string]bool
}

var (
	helpMu    sync.Mutex
	helpCache = map[string]commandHelp{}
	flagLine  = regexp.MustCompile(`^\s+(?:-[A-Za-z], )?--([a-z0-9][a-z0-9-]*)`)
	// "(env CONVERGE_PVE_URL or PVE_URL)": the variable, and its older name.
	envName = regexp.MustCompile(`\b(?:env|or) ([A-Z][A-Z0-9_]+)`)
)

func help(t *testing.T, command string) commandHelp {
	t.Helper()
	helpMu.Lock()
	defer helpMu.Unlock()
	if h, ok := helpCache[command]; ok {
		return h
	}
	out, err := exec.Command(converge(t), command, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("converge %s --help: %v\n%s", command, err, out)
	}
	h := commandHelp{flags: map[string]bool{}, env: map[string]bool{}}
	for _, line := range strings.Split(string(out), "\n") {
		if m := flagLine.FindStringSubmatch(line); m != nil {
			h.flags[m[1]] = true
		}
		for _, m := range envName.FindAllStringSubmatch(line, -1) {
			h.env[m[1]] = true
		}
	}
	if len(h.flags) < 5 {
		t.Fatalf("converge %s --help: found only flags %v in\n%s", command, h.flags, out)
	}
	helpCache[command] = h
	return h
}

// checkFlags reports every --flag (or --flag=value) among args that
// `converge <command>` does not accept.
func checkFlags(t *testing.T, where, command string, args []string) {
	t.Helper()
	h := help(t, command)
	for _, a := range args {
		if !strings.HasPrefix(a, "--") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !h.flags[name] {
			t.Errorf("%s: converge %s has no flag --%s", where, command, name)
		}
	}
}
