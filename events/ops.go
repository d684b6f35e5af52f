package events

// Parameters of the whole-guest operations (OpResize, OpMigrate,
// OpSetPool, OpSnapshot), as actions and planner steps carry them.

// ResizeOp grows disk Disk to SizeGiB.
type ResizeOp struct {
	Disk    string `json:"disk"`
	SizeGiB int64  `json:"size_gib"`
}

// MigrateOp moves a guest to Target. Online is a live migration of a
// running VM (its local disks move along); Restart a container's restart
// migration; HA a request to the HA manager, whose move is waited for.
type MigrateOp struct {
	Target  string `json:"target"`
	Online  bool   `json:"online,omitempty"`
	Restart bool   `json:"restart,omitempty"`
	HA      bool   `json:"ha,omitempty"`
}

// PoolOp moves a guest from pool From ("" none) to pool To ("" none);
// Create makes To first if it does not exist (--create-pools).
type PoolOp struct {
	From   string `json:"from,omitempty"`
	To     string `json:"to,omitempty"`
	Create bool   `json:"create,omitempty"`
}

// SnapshotOp is a protective snapshot Name taken before Before; Keep,
// when above 0, prunes the guest's older converge snapshots to that many.
type SnapshotOp struct {
	Name   string `json:"name"`
	Before Op     `json:"before"`
	Keep   int    `json:"keep,omitempty"`
}

// SnapshotPrefix starts the name of every snapshot converge takes:
// pruning touches no other.
const SnapshotPrefix = "converge-"

// SnapshotName is the name of the protective snapshot action actionID
// takes: SnapshotPrefix and the id, in Proxmox's snapshot-name alphabet
// (pve-configid: a letter first, then letters, digits, '-' and '_', at
// most 40), the id's tail kept when it is too long (the tail, vmid,
// revision and count, is what tells actions apart).
func SnapshotName(actionID string) string {
	b := []byte(actionID)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	const max = 40 - len(SnapshotPrefix)
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return SnapshotPrefix + string(b)
}
