package pvesim_test

import (
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/pvesim"
)

// TestHARebalanceTicker: with Options.HARebalance (converge sim
// --ha-rebalance) the load balancer runs a round every interval by
// itself, as the CRM's manager loop does on PVE 9.2 (Manager.pm
// load_balance, called each CRM round).
func TestHARebalanceTicker(t *testing.T) {
	s := startSim(t, pvesim.Options{Nodes: 2, Version: "9", HARebalance: 5 * time.Millisecond})
	deadline := time.Now().Add(30 * time.Second)
	for s.HARebalanceRounds() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d rounds in 30s with a 5ms interval", s.HARebalanceRounds())
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, not timing
	}
}
