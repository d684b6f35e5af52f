package main

import (
	"os"
	"testing"
)

// TestMain lets the test binary act as the converge binary for the bench
// test's simulator child (`converge bench --sim-process` re-executes
// itself as `converge sim`). The process-level tests are in e2e/.
func TestMain(m *testing.M) {
	if os.Getenv("CONVERGE_RUN_MAIN") == "1" {
		os.Args = append([]string{"converge"}, os.Args[1:]...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}
