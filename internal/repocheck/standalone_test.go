package repocheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestStandsAlone fails for a source file or document that cites a file
// outside the repository (a design notebook, a sibling checkout): the
// contract lives in docs/ and the packages' doc.go.
func TestStandsAlone(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	outside := regexp.MustCompile(`DESIGN\.md|\.\./shared/|\.\./\.library`)
	self, _ := filepath.Abs("standalone_test.go")
	read := 0
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && p != root || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		switch filepath.Ext(p) {
		case ".go", ".md", ".yaml", ".conf", ".service", ".example":
		default:
			return nil
		}
		if p == self {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		read++
		if m := outside.Find(b); m != nil {
			rel, _ := filepath.Rel(root, p)
			t.Errorf("%s cites %s, outside the repository", rel, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if read < 50 {
		t.Fatalf("read only %d files under %s", read, root)
	}
}
