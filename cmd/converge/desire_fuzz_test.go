package main

import (
	"strings"
	"testing"

	"github.com/converge-pve/converge/events"
)

// FuzzDesireFile: a `converge desire -f` file publishes every entry or
// none. What it accepts is exactly what the planner accepts (each body
// decodes for its own vmid); what it refuses says why.
func FuzzDesireFile(f *testing.F) {
	for _, s := range []string{
		"vmid: 101\npower: running\ncores: 2\n",
		"- vmid: 101\n  power: running\n- vmid: 102\n  tags: [a, b]\n",
		"guests:\n  - vmid: 103\n    memory_mib: 2048\n",
		`[{"vmid":101,"cores":2},{"vmid":102,"cores":"x"}]`,
		"vmid: 101\ncores: 2\ncores: 4\n",
		"&a {vmid: 101}\n---\n*a\n",
		"vmid: 0x65\n", "- ~\n", "guests: []\n", "",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		bodies, err := parseDesiredFile("f.yaml", raw)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.yaml: ") {
				t.Fatalf("error does not name the file: %v", err)
			}
			if bodies != nil {
				t.Fatal("refused, yet bodies returned")
			}
			return
		}
		if len(bodies) == 0 {
			t.Fatal("accepted nothing without an error")
		}
		for _, b := range bodies {
			d, err := events.DecodeDesired(b.body, b.vmid)
			if err != nil || d.VMID != b.vmid {
				t.Fatalf("published a body the planner refuses (vmid %d): %v\n%s", b.vmid, err, b.body)
			}
		}
	})
}
