package importer

import (
	"context"
	"fmt"
	"strings"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/pve"
)

// HA placement on import. Under PVE 9's HA rules a guest converge placed
// carries converge's own node-affinity rule (events.HARuleName): a
// desired state without its node would make converge delete that rule.
// So import reads how HA places the guests, as the observer does, and
// keeps the node of converge's own rule; any other HA guest's node is
// left out (a desired node would make converge write a rule).

// placements are the HA guests' placements by vmid, as the observer
// journals them; nil when the inventory lists no HA guest or px cannot
// read them. A failed read fails the import: without it, a guest converge
// placed would be imported without its node.
func placements(ctx context.Context, px Proxmox, inv []pve.Resource) (map[int]*events.HAPlacement, error) {
	hr, ok := px.(pve.PlacementReader)
	if !ok || !pve.HasHA(inv) {
		return nil, nil
	}
	mode, out, err := pve.ReadPlacements(ctx, hr, "")
	if err != nil {
		return nil, fmt.Errorf("read how HA places guests (needs Sys.Audit on /): %w", err)
	}
	if mode == events.HAGroups {
		out = map[int]*events.HAPlacement{}
		for i := range inv {
			if inv[i].HAState != "" {
				out[inv[i].VMID] = &events.HAPlacement{Groups: true}
			}
		}
	}
	return out, nil
}

// ownNode is the node converge's own rule places guest o on, "" when no
// rule of converge's places it on one node.
func ownNode(o *events.Observed) string {
	p := o.HAPlacement
	if !p.Owned(o.VMID) || p.Inactive != "" || len(p.Nodes) != 1 {
		return ""
	}
	name, _, _ := strings.Cut(p.Nodes[0], ":")
	return name
}
