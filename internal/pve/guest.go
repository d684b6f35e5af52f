package pve

import (
	"fmt"
	"regexp"
	"strconv"
)

// Kind is a guest type, also the path segment of its API endpoints.
type Kind string

const (
	KindQEMU Kind = "qemu"
	KindLXC  Kind = "lxc"
)

// Valid reports whether k is a known guest type.
func (k Kind) Valid() bool { return k == KindQEMU || k == KindLXC }

// VMID bounds enforced by Proxmox.
const (
	MinVMID = 100
	MaxVMID = 999999999
)

// GuestRef addresses one guest: its type, the node that holds it and its id.
type GuestRef struct {
	Kind Kind
	Node string
	VMID int
}

// IsZero reports whether r is the zero GuestRef.
func (r GuestRef) IsZero() bool { return r == GuestRef{} }

// String renders "qemu/100@pve", used in error messages and logs.
func (r GuestRef) String() string {
	return string(r.Kind) + "/" + strconv.Itoa(r.VMID) + "@" + r.Node
}

// nodeNameRE matches PVE node names (DNS labels). Node names are put into
// paths verbatim, so anything else is refused before a request is sent.
var nodeNameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$`)

// Validate checks that r can be put into an API path.
func (r GuestRef) Validate() error {
	switch {
	case !r.Kind.Valid():
		return fmt.Errorf("guest kind %q must be %q or %q", r.Kind, KindQEMU, KindLXC)
	case !nodeNameRE.MatchString(r.Node):
		return fmt.Errorf("node name %q is not a valid PVE node name", r.Node)
	case r.VMID < MinVMID || r.VMID > MaxVMID:
		return fmt.Errorf("vmid %d out of range %d..%d", r.VMID, MinVMID, MaxVMID)
	}
	return nil
}

// path is the guest's API path, e.g. /nodes/pve/qemu/100.
func (r GuestRef) path() string {
	return "/nodes/" + r.Node + "/" + string(r.Kind) + "/" + strconv.Itoa(r.VMID)
}
