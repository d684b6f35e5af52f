package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/internal/pvesim/pvesimtest"
)

// runSplit is run with stdout and stderr apart.
func runSplit(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	root := newRoot()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err = root.Execute()
	return out.String(), errOut.String(), err
}

// `converge import` against the simulator writes a file `desire -f`
// reads as it is, in YAML (notes as comments) and JSON (notes on stderr);
// --node, --pool and --tag select; templates only with --templates.
func TestImportCLIOutputIsDesireInput(t *testing.T) {
	clearEnv(t)
	sim := pvesimtest.Start(t, pvesim.Options{Nodes: 2})
	if err := sim.AddPool("web"); err != nil {
		t.Fatal(err)
	}
	for _, g := range []pvesim.GuestSpec{
		{VMID: 101, Name: "web1", Running: true, Tags: []string{"web"}, Config: map[string]string{"scsi1": "local-lvm:vm-101-disk-1,size=1536M"}},
		{VMID: 102, Kind: pvesim.LXC, Node: "pve2", Name: "ct1", Config: map[string]string{"mp0": "local-lvm:subvol-102-disk-1,mp=/data,size=4G"}},
		{VMID: 900, Name: "tmpl", Template: true},
	} {
		if err := sim.AddGuest(g); err != nil {
			t.Fatal(err)
		}
	}
	if err := pvesimtest.Client(t, sim).SetPool(pvesimtest.Context(t), "web", 101, false); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CONVERGE_PVE_TOKEN_SECRET", pvesimtest.TokenSecret)
	pveArgs := []string{"--observed", "--pve-url", sim.URL(), "--pve-token-id", pvesimtest.TokenID}
	imp := func(args ...string) (string, string) {
		t.Helper()
		out, errOut, err := runSplit(t, append(append([]string{"import"}, args...), pveArgs...)...)
		if err != nil {
			t.Fatalf("import %v: %v\n%s", args, err, errOut)
		}
		return out, errOut
	}
	yamlOut, _ := imp("--all")
	bodies, err := parseDesiredFile("import.yaml", []byte(yamlOut))
	if err != nil || len(bodies) != 2 {
		t.Fatalf("desire -f refuses the import (%d entries): %v\n%s", len(bodies), err, yamlOut)
	}
	for _, want := range []string{"# 101: disks.scsi1: left out: its size, 1.50 GiB", "# skipped 900: a template", "pool: web", "mp0:"} {
		if !strings.Contains(yamlOut, want) {
			t.Errorf("the YAML says nowhere %q:\n%s", want, yamlOut)
		}
	}
	jsonOut, notes := imp("--all", "-o", "json")
	if bodies, err := parseDesiredFile("import.json", []byte(jsonOut)); err != nil || len(bodies) != 2 {
		t.Fatalf("desire -f refuses the JSON import: %v\n%s", err, jsonOut)
	}
	if !json.Valid([]byte(jsonOut)) || !strings.Contains(notes, "101: disks.scsi1: left out") {
		t.Errorf("-o json: notes not on stderr: %q", notes)
	}
	for args, want := range map[string][]int{"--node pve2": {102}, "--pool web": {101}, "--tag web": {101}, "101 900": {101}, "--all --templates": {101, 102, 900}} {
		out, _ := imp(append(strings.Fields(args), "-o", "json")...)
		var doc struct {
			Guests []struct {
				VMID int `json:"vmid"`
			} `json:"guests"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatal(err)
		}
		var got []int
		for _, g := range doc.Guests {
			got = append(got, g.VMID)
		}
		if len(got) != len(want) || !equalInts(got, want) {
			t.Errorf("import %s: guests %v, want %v", args, got, want)
		}
	}
	// Without --observed the views say which guests are managed already:
	// no NATS, no import (a managed guest's desired state is never
	// overwritten unseen).
	if _, errOut, err := runSplit(t, "import", "--all", "--nats", "nats://127.0.0.1:1", "--pve-url", sim.URL(), "--pve-token-id", pvesimtest.TokenID); err == nil || !strings.Contains(err.Error(), "--observed") {
		t.Errorf("import without NATS nor --observed: %v %s", err, errOut)
	}
	for _, args := range [][]string{{"import"}, {"import", "abc"}, {"status", "-o", "yaml"}} {
		if _, _, err := runSplit(t, args...); codeOf(err) != exitUsage {
			t.Errorf("%v: exit %d (%v), want %d", args, codeOf(err), err, exitUsage)
		}
	}
}

func equalInts(a, b []int) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}
