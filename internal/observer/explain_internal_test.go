package observer

import (
	"reflect"
	"testing"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/pve"
)

// TestExplainsEveryRowField: a read-back explains a row only if it says
// what every field plan compares (rowKey) says; a field added to rowKey
// without its check in explains would let its change wait for the budget.
func TestExplainsEveryRowField(t *testing.T) {
	row := pve.Resource{VMID: 100, Kind: pve.KindLXC, Node: "pve1", Name: "web", Status: "running", Tags: []string{"a", "b"},
		MaxCPU: 2, MaxMemMiB: 1024, HAState: "started", Pool: "prod"}
	ob := events.Observed{VMID: 100, Exists: true, Node: "pve1", Kind: events.LXC, Status: "running", HA: "started", Pool: "prod",
		Config: events.GuestConfig{Name: "web", Tags: []string{"a", "b"}, Cores: 2, MemoryMiB: 1024}}
	if !explains(&ob, &row) {
		t.Fatal("a read-back saying what the row says does not explain it")
	}
	changes := map[string]func(r *pve.Resource){
		"Status":    func(r *pve.Resource) { r.Status = "stopped" },
		"Lock":      func(r *pve.Resource) { r.Lock = "backup" },
		"Tags":      func(r *pve.Resource) { r.Tags = []string{"a"} },
		"Name":      func(r *pve.Resource) { r.Name = "db" },
		"Node":      func(r *pve.Resource) { r.Node = "pve2" },
		"HA":        func(r *pve.Resource) { r.HAState = "stopped" },
		"Pool":      func(r *pve.Resource) { r.Pool = "" },
		"Kind":      func(r *pve.Resource) { r.Kind = pve.KindQEMU },
		"Template":  func(r *pve.Resource) { r.Template = true },
		"MaxCPU":    func(r *pve.Resource) { r.MaxCPU = 4 },
		"MaxMemMiB": func(r *pve.Resource) { r.MaxMemMiB = 2048 },
	}
	k := reflect.TypeFor[rowKey]()
	for i := range k.NumField() {
		change, ok := changes[k.Field(i).Name]
		if !ok {
			t.Fatalf("rowKey.%s has no case here: check that explains compares it, and add one", k.Field(i).Name)
		}
		r := row
		r.Tags = append([]string(nil), row.Tags...)
		change(&r)
		if rowKeyOf(&r) == rowKeyOf(&row) {
			t.Fatalf("the case for %s changes no rowKey field", k.Field(i).Name)
		}
		if explains(&ob, &r) {
			t.Fatalf("a row whose %s differs from the read-back is explained by it", k.Field(i).Name)
		}
	}
	if len(changes) != k.NumField() {
		t.Fatalf("%d cases for %d rowKey fields", len(changes), k.NumField())
	}
	gone := ob
	gone.Exists = false
	if explains(&gone, &row) {
		t.Fatal("a read-back of a guest gone explains a row")
	}
}
