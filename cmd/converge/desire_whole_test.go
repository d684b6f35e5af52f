package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/converge-pve/converge/events"
)

// The whole-guest fields from flags: node, pool, disks and snapshots, into
// a valid desired body; a bad --disk value is a clear error.
func TestDesireWholeFlags(t *testing.T) {
	f := &desireFlags{}
	cmd := desireCmd(&globals{}, f)
	if err := cmd.ParseFlags([]string{"--node", "pve2", "--pool", "prod", "--disk", "scsi0=32", "--disk", "scsi1=8@local-lvm",
		"--snapshot-before", "restart,resize"}); err != nil {
		t.Fatal(err)
	}
	b, err := desiredFromFlags(cmd, f, "101")
	if err != nil {
		t.Fatal(err)
	}
	var d events.Desired
	if err := json.Unmarshal(b.body, &d); err != nil {
		t.Fatal(err)
	}
	if *d.Node != "pve2" || *d.Pool != "prod" || d.Disks["scsi0"].SizeGiB != 32 || d.Disks["scsi1"] != (events.DiskWant{SizeGiB: 8, Storage: "local-lvm"}) ||
		strings.Join(d.SnapshotBefore, ",") != "restart,resize" {
		t.Fatalf("desired %+v", d)
	}
	if _, err := parseDiskFlags([]string{"scsi0"}); err == nil || !strings.Contains(err.Error(), "KEY=SIZE_GIB") {
		t.Fatalf("bad --disk: %v", err)
	}
}

// A YAML file with every whole-guest field is accepted as is.
func TestDesireFileWholeGuest(t *testing.T) {
	const doc = `
vmid: 101
kind: qemu
node: pve2
pool: prod
disks: {scsi0: {size_gib: 32}}
net: {net0: {bridge: vmbr1, tag: 10}}
cloudinit:
  user: ops
  ssh_keys: ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB ops@host"]
  ipconfig: {ipconfig0: "ip=10.0.0.5/24,gw=10.0.0.1"}
snapshot_before: [restart]
`
	bodies, err := parseDesiredFile("f.yaml", []byte(doc))
	if err != nil || len(bodies) != 1 {
		t.Fatalf("%v %v", bodies, err)
	}
	if _, err := parseDesiredFile("f.yaml", []byte("vmid: 101\ndisks: {scsi0: {size_gib: 0}}\n")); err == nil {
		t.Fatal("a zero disk size was accepted")
	}
}
