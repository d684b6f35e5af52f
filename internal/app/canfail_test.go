package app_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// lateCases are the tests whose assertions that nothing happened must
// fail under the late fault, with the settle it faults and what their own
// failure says.
var lateCases = []struct {
	test   string
	settle int
	says   string
}{
	{"TestRestartPolicy", 1, "restart not allowed, yet the simulator saw [qmshutdown]"},
	{"TestRestartPolicy", 2, "want exactly one reboot"},
	{"TestRestartWindow", 1, "window closed, yet the simulator saw [qmshutdown]"},
	{"TestRebootNeverForced", 1, "tasks [qmreboot qmshutdown], want exactly one reboot"},
	{"TestCloneOntoTakenVMIDRefused", 1, "guest 105 touched: tasks [qmshutdown]"},
	{"TestDestroyGate", 1, "guest 701 behind the gate saw [qmshutdown]"},
	{"TestDestroyGate", 4, "protected guest 703 touched: tasks [qmstart]"},
	{"TestDestroyAllowed", 1, "protected guest 713 destroyed or touched: tasks [qmstart]"},
	{"TestDisksGrowKeptAndShrinkRefused", 1, "mutations after the resize, with cores waiting for a restart"},
	{"TestDisksGrowKeptAndShrinkRefused", 4, "mutations for a refused shrink"},
	{"TestHotplugAware", 1, "restart never, yet [qmshutdown]"},
	{"TestPendingEditCorrected", 1, "pending edit not corrected within two verification periods"},
	{"TestSkewedObserverDoesNotFloodProxmox", 1, "further passes made 1 Proxmox mutations"},
	{"TestSnapshotBeforeRestart", 1, "want one reboot"},
	{"TestNetworkMACKept", 1, "mutations after convergence: false drift"},
	{"TestProxmoxRefusalsNeverReachProxmox", 1, "a rejected desired value caused"},
	{"TestProxmoxRefusalsNeverReachProxmox", 2, "a desired value the container's kind refuses caused"},
}

// TestNegativeAssertionsCanFail runs each of lateCases in a test binary of
// its own (this one) under the late fault and wants it to fail with its
// own message, having logged the fault: each assertion that nothing
// happened waits long enough to see what the passes before it called for.
// One of them also runs without the fault and must pass, which shows that
// the failures are the fault's.
func TestNegativeAssertionsCanFail(t *testing.T) {
	if os.Getenv(lateFaultEnv) != "" {
		t.Skipf("%s is set: this is a run under the late fault", lateFaultEnv)
	}
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("runs the pipeline tests again under the late fault; never skipped under CI=1")
	}
	slots := make(chan struct{}, 2) // two test binaries at a time
	run := func(t *testing.T, name string, settle int) (string, error) {
		t.Helper()
		slots <- struct{}{}
		defer func() { <-slots }()
		// A child gets 3 minutes, or less if the package's own -timeout
		// would end first: a hung child then fails this test, not the
		// whole package.
		limit := 3 * time.Minute
		if d, ok := t.Deadline(); ok {
			limit = min(limit, time.Until(d)-30*time.Second)
		}
		if limit < 30*time.Second {
			t.Fatalf("%s left of the test timeout: too little to run %s again", limit, name)
		}
		ctx, cancel := context.WithTimeout(context.Background(), limit+10*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run", "^"+name+"$", "-test.count=1", "-test.v", "-test.timeout="+limit.String())
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, lateFaultEnv+"=") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		if settle > 0 {
			cmd.Env = append(cmd.Env, fmt.Sprintf("%s=%d", lateFaultEnv, settle))
		}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	for _, c := range lateCases {
		t.Run(fmt.Sprintf("%s/settle%d", c.test, c.settle), func(t *testing.T) {
			t.Parallel()
			out, err := run(t, c.test, c.settle)
			var exit *exec.ExitError
			switch {
			case err == nil:
				t.Fatalf("%s passed with the late fault at its settle #%d: an assertion that nothing happened did not wait for what the passes before it called for\n%s",
					c.test, c.settle, tail(out))
			case !errors.As(err, &exit) || exit.ExitCode() != 1 || strings.Contains(out, "panic:"):
				t.Fatalf("%s under the late fault: %v, not a test failure\n%s", c.test, err, tail(out))
			case !strings.Contains(out, "--- FAIL: "+c.test+" "):
				t.Fatalf("%s under the late fault: no failure of the test itself\n%s", c.test, tail(out))
			case !strings.Contains(out, "late fault: "):
				t.Fatalf("%s failed without the late fault taking effect\n%s", c.test, tail(out))
			case !strings.Contains(out, c.says):
				t.Fatalf("%s under the late fault failed, but not saying %q\n%s", c.test, c.says, tail(out))
			}
		})
	}
	t.Run("TestCloneOntoTakenVMIDRefused/no-fault", func(t *testing.T) {
		t.Parallel()
		out, err := run(t, "TestCloneOntoTakenVMIDRefused", 0)
		if err != nil || !strings.Contains(out, "--- PASS: TestCloneOntoTakenVMIDRefused ") || strings.Contains(out, "late fault: ") {
			t.Fatalf("without the late fault: %v\n%s", err, tail(out))
		}
	})
}

// tail is the end of a test binary's output.
func tail(out string) string {
	const n = 4000
	if len(out) > n {
		return "…" + out[len(out)-n:]
	}
	return out
}
