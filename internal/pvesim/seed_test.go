package pvesim_test

import (
	"testing"

	"github.com/converge-pve/converge/internal/pvesim"
)

// GrowDemo adds exactly the demo guests a larger Options.Guests would have
// created, and leaves existing ones alone.
func TestGrowDemoMatchesSeed(t *testing.T) {
	big, err := pvesim.New(pvesim.Options{Nodes: 3, Guests: 12})
	if err != nil {
		t.Fatal(err)
	}
	grown, err := pvesim.New(pvesim.Options{Nodes: 3, Guests: 5})
	if err != nil {
		t.Fatal(err)
	}
	if err := grown.AddGuest(pvesim.GuestSpec{VMID: 110, Name: "mine"}); err != nil {
		t.Fatal(err)
	}
	grown.GrowDemo(5, 12)
	if n, m := len(big.Guests()), len(grown.Guests()); n != m {
		t.Fatalf("grown to %d guests, seeded %d", m, n)
	}
	gg := grown.Guests()
	for i, want := range big.Guests() {
		got := gg[i]
		if got.VMID != want.VMID {
			t.Fatalf("guest %d where %d was seeded", got.VMID, want.VMID)
		}
		vmid := got.VMID
		if vmid == 110 {
			if got.Config["name"] != "mine" {
				t.Errorf("existing guest 110 replaced: %v", got.Config)
			}
			continue
		}
		if got.Kind != want.Kind || got.Node != want.Node || got.Status != want.Status || got.Config["name"] != want.Config["name"] ||
			got.Config["cores"] != want.Config["cores"] || got.Config["memory"] != want.Config["memory"] {
			t.Errorf("guest %d: grown %+v, seeded %+v", vmid, got, want)
		}
	}
}
