package scenario

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"
	"rsc.io/script"
	"rsc.io/script/scripttest"
)

// Run runs every script matching pattern (e.g. "testdata/*.txtar") as a
// subtest. newCmds returns the commands of a fresh harness for one script;
// the default commands (stdout, cmp, echo, …) come on top.
func Run(t *testing.T, pattern string, newCmds func(t *testing.T) map[string]script.Cmd) {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios match %s (%v)", pattern, err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			e := script.NewEngine()
			// Scenarios run on the harness's clock: nothing waits on time
			// or on processes.
			for _, name := range []string{"sleep", "exec", "wait"} {
				delete(e.Cmds, name)
			}
			for name, cmd := range newCmds(t) {
				e.Cmds[name] = cmd
			}
			s, err := script.NewState(context.Background(), t.TempDir(), nil)
			if err != nil {
				t.Fatal(err)
			}
			a, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.ExtractFiles(a); err != nil {
				t.Fatal(err)
			}
			scripttest.Run(t, e, s, file, strings.NewReader(string(a.Comment)))
		})
	}
}

// Cmd makes a command that runs fn with its arguments and prints what fn
// returns (for the stdout and cmp commands to check).
func Cmd(summary, args string, fn func(args []string) (string, error)) script.Cmd {
	return script.Command(script.CmdUsage{Summary: summary, Args: args}, func(_ *script.State, a ...string) (script.WaitFunc, error) {
		out, err := fn(a)
		if err != nil {
			return nil, err
		}
		return func(*script.State) (string, string, error) { return out, "", nil }, nil
	})
}
