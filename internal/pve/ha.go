package pve

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// HAResource is a guest under Proxmox's HA manager, as GET
// /cluster/ha/resources lists it. HA-managed guests are started and
// stopped by the HA stack and can only be deleted with purge; converge
// reads them to know which guests it must hand to HA or take out of it.
type HAResource struct {
	SID  string // "vm:100", "ct:101"
	Type string // "vm" (QEMU) or "ct" (LXC)
	VMID int
	// State is the requested state: started (also when the resource sets
	// none, or the alias "enabled"), stopped, disabled or ignored.
	State string
	// NoFailback: failback is 0 (PVE 9; the default is 1), so HA leaves
	// the guest on any node its rule allows.
	NoFailback bool
}

// haSID is the HA resource id of a guest: "vm:<vmid>" or "ct:<vmid>".
func haSID(ref GuestRef) string {
	if ref.Kind == KindLXC {
		return "ct:" + strconv.Itoa(ref.VMID)
	}
	return "vm:" + strconv.Itoa(ref.VMID)
}

// HAResources lists the cluster's HA resources of guests (types vm and
// ct), sorted by VMID, with one call.
func (c *Client) HAResources(ctx context.Context) ([]HAResource, error) {
	var out []HAResource
	err := c.do(ctx, OpReadHA, GuestRef{}, http.MethodGet, "/cluster/ha/resources", nil, func(b []byte) (err error) {
		items, err := decodeAnswer[[]haItem](b)
		if err == nil {
			out, err = haResources(items)
		}
		return err
	})
	if err != nil {
		return nil, err // do classed it (an unreadable answer is ClassUnknown there)
	}
	return out, nil
}

// haItem is an entry of GET /cluster/ha/resources.
type haItem struct {
	SID      string `json:"sid"`
	Type     string `json:"type"`
	State    string `json:"state"`
	Failback Value  `json:"failback"`
}

// decodeHAResources reads the data of GET /cluster/ha/resources.
func decodeHAResources(data []byte) ([]HAResource, error) {
	items, err := decodeData[[]haItem](data)
	if err != nil {
		return nil, fmt.Errorf("decode HA resources: %w", err)
	}
	return haResources(items)
}

// haResources reads the list; entries of other resource types, or whose
// sid names no vmid, are left out.
func haResources(items []haItem) ([]HAResource, error) {
	out := make([]HAResource, 0, len(items))
	for _, it := range items {
		typ, name, ok := strings.Cut(it.SID, ":")
		if !ok || (typ != "vm" && typ != "ct") {
			continue
		}
		vmid, err := strconv.Atoi(name)
		if err != nil || vmid < MinVMID || vmid > MaxVMID {
			continue
		}
		if it.Type != "" && it.Type != typ {
			return nil, fmt.Errorf("HA resource %s has type %q", it.SID, it.Type)
		}
		st := it.State
		if st == "" || st == "enabled" {
			st = "started" // PVE::HA::Config::read_and_check_resources_config
		}
		fb, err := it.Failback.Bool()
		out = append(out, HAResource{SID: it.SID, Type: typ, VMID: vmid, State: st, NoFailback: err == nil && !it.Failback.IsNull() && !fb})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].VMID < out[j].VMID })
	return out, nil
}

// RemoveHA takes a guest out of HA management (DELETE
// /cluster/ha/resources/{vm|ct}:<vmid>); the guest itself is left as it
// is. A guest HA does not manage is ClassAlreadyDone ("cannot delete
// service 'vm:100', not HA managed!").
func (c *Client) RemoveHA(ctx context.Context, ref GuestRef) error {
	if err := ref.Validate(); err != nil {
		return &Error{Class: ClassTerminal, Op: OpRemoveHA, Ref: ref, Message: err.Error(), Err: err}
	}
	return c.do(ctx, OpRemoveHA, ref, http.MethodDelete, "/cluster/ha/resources/"+haSID(ref), nil, nil)
}
