package main

import (
	"strings"
	"testing"
)

// The settings that can be switched off take their keyword from a flag, a
// variable or the file, keys unchanged; the negative values that meant
// the same before (issue 36) still do, with a warning naming the keyword.
func TestOffAndUnlimitedKeywords(t *testing.T) {
	clearEnv(t)
	file := writeConfig(t, "config-refresh: off\nnode-rate: unlimited\ncheckpoint-interval: -1s\nclone-concurrency: -1\n")
	t.Setenv("CONVERGE_CREATE_RATE", "unlimited")
	out, err := run(t, "config", "print", "planner", "--config", file, "--node-concurrency", "-1")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"config-refresh         off", "node-rate              unlimited", "checkpoint-interval    off",
		"clone-concurrency      unlimited", "create-rate            unlimited", "node-concurrency       unlimited",
		"warning: --checkpoint-interval -1s: a negative value is deprecated, give --checkpoint-interval off",
		"warning: --clone-concurrency -1: a negative value is deprecated, give --clone-concurrency unlimited",
		"warning: --node-concurrency -1: a negative value is deprecated, give --node-concurrency unlimited"} {
		if !strings.Contains(out, want) {
			t.Errorf("output does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "warning: --node-rate") || strings.Contains(out, "warning: --config-refresh") {
		t.Errorf("a keyword is warned about:\n%s", out)
	}
}
