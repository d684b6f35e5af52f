package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// defaultPrefixes: every operation. The whole API is about 350 KB of Go
// data: small enough, and every path the simulator serves is checkable
// (-prefixes narrows it, e.g. "/nodes/{node}/qemu,/version").
const defaultPrefixes = "all"

func main() {
	apidata := flag.String("apidata", "", "path of pve-docs' api-viewer/apidata.js")
	version := flag.String("version", "", "pve-docs version of the file (default: from its name, pve-docs-X.Y.Z…)")
	dir := flag.String("dir", ".", "directory to write rules_gen.go and the rules_*_gen.go files into (stale ones are removed)")
	prefixes := flag.String("prefixes", defaultPrefixes, `comma-separated path prefixes to keep ("all": every operation)`)
	flag.Parse()
	if err := run(*apidata, *version, *dir, *prefixes); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(apidata, version, dir, prefixes string) error {
	if apidata == "" {
		return errors.New("no -apidata: set PVE_APIDATA to the path of pve-docs' api-viewer/apidata.js")
	}
	// The file does not carry its release: take it from the flag or the
	// file's name, and refuse a name that contradicts the flag.
	if m := regexp.MustCompile(`pve-docs-(\d+\.\d+\.\d+)`).FindStringSubmatch(apidata); m != nil {
		if version != "" && version != m[1] {
			return fmt.Errorf("-version %s, but the file's name says pve-docs %s", version, m[1])
		}
		version = m[1]
	}
	if version == "" {
		return errors.New("no -version and none in the file's name (pve-docs-X.Y.Z…)")
	}
	src, err := os.ReadFile(apidata)
	if err != nil {
		return err
	}
	tree, err := extract(src)
	if err != nil {
		return fmt.Errorf("%s: %w", apidata, err)
	}
	var keep []string
	if prefixes != "all" {
		keep = strings.Split(prefixes, ",")
	}
	ops := collect(tree, keep)
	files, err := render(ops, version)
	if err != nil {
		return err
	}
	stale, _ := filepath.Glob(filepath.Join(dir, "rules_*gen.go"))
	for _, f := range stale {
		if _, ok := files[filepath.Base(f)]; !ok {
			if err := os.Remove(f); err != nil {
				return err
			}
		}
	}
	for name, code := range files {
		if err := os.WriteFile(filepath.Join(dir, name), code, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// extract returns the schema tree: the JSON array assigned to apiSchema,
// without the JavaScript around it.
func extract(src []byte) ([]any, error) {
	i := bytes.Index(src, []byte("apiSchema"))
	if i < 0 {
		return nil, errors.New("no apiSchema in the file")
	}
	start := bytes.IndexByte(src[i:], '[')
	if start < 0 {
		return nil, errors.New("no array after apiSchema")
	}
	dec := json.NewDecoder(bytes.NewReader(src[i+start:]))
	dec.UseNumber() // bounds stay exact: 1e9 must not become 1000000000.000001
	var tree []any
	if err := dec.Decode(&tree); err != nil {
		return nil, fmt.Errorf("apiSchema is not a JSON array: %w", err)
	}
	return tree, nil
}

type op struct {
	method, path string
	params       map[string]any
}

func collect(nodes []any, keep []string) []op {
	var ops []op
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		path, _ := n["path"].(string)
		info, _ := n["info"].(map[string]any)
		if keep == nil || slices.ContainsFunc(keep, func(p string) bool { return path == p || strings.HasPrefix(path, p+"/") }) {
			for method, v := range info {
				m, _ := v.(map[string]any)
				params, _ := m["parameters"].(map[string]any)
				ops = append(ops, op{method: method, path: path, params: params})
			}
		}
		children, _ := n["children"].([]any)
		for _, c := range children {
			if cm, ok := c.(map[string]any); ok {
				walk(cm)
			}
		}
	}
	for _, n := range nodes {
		if nm, ok := n.(map[string]any); ok {
			walk(nm)
		}
	}
	slices.SortFunc(ops, func(a, b op) int {
		return cmp2(a.path, b.path, a.method, b.method)
	})
	return ops
}

func cmp2(a1, b1, a2, b2 string) int {
	if c := strings.Compare(a1, b1); c != 0 {
		return c
	}
	return strings.Compare(a2, b2)
}
