package pveschema

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedUpToDate regenerates the rules from the apidata.js that
// PVE_APIDATA names and compares them with the committed rules_*gen.go files. The file stays
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
	dir := t.TempDir()
	cmd := exec.Command(goBin, "run", "./gen", "-apidata", apidata, "-version", PVEDocsVersion, "-dir", dir)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run ./gen: %v\n%s", err, msg)
	}
	fresh, _ := filepath.Glob(filepath.Join(dir, "rules*_gen.go"))
	committed, _ := filepath.Glob("rules*_gen.go")
	if len(fresh) != len(committed) {
		t.Errorf("the generator writes %d files, %d are committed: run PVE_APIDATA=%s go generate ./internal/pveschema", len(fresh), len(committed), apidata)
	}
	for _, f := range fresh {
		want, _ := os.ReadFile(f)
		got, err := os.ReadFile(filepath.Base(f))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is stale or missing: run PVE_APIDATA=%s go generate ./internal/pveschema", filepath.Base(f), apidata)
		}
	}
}
