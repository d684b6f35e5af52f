package pveschema

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedUpToDate regenerates the rules from the apidata.js that
// PVE_APIDATA names and compares them with rules_gen.go. The file stays
// outside the repository, so without the variable (as in CI, which does
// not regenerate) the test skips and says so.
func TestGeneratedUpToDate(t *testing.T) {
	apidata := os.Getenv("PVE_APIDATA")
	if apidata == "" {
		t.Skip("SKIPPED: PVE_APIDATA is not set; point it at pve-docs' api-viewer/apidata.js to check rules_gen.go is up to date")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("SKIPPED: no go command on PATH to run the generator with")
	}
	out := filepath.Join(t.TempDir(), "rules_gen.go")
	cmd := exec.Command(goBin, "run", "./gen", "-apidata", apidata, "-version", PVEDocsVersion, "-out", out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run ./gen: %v\n%s", err, msg)
	}
	fresh, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile("rules_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fresh, committed) {
		t.Errorf("rules_gen.go is stale: run PVE_APIDATA=%s go generate ./internal/pveschema", apidata)
	}
}
