package pvesim

import "testing"

// TestDigestOfTheConfigFile pins the digest (SHA-1 of the serialised
// config file: comment lines of the description, keys in order, [PENDING],
// snapshot sections, [special:cloudinit]) for guests with each part, so
// that the serialisation can change in form but not in bytes.
func TestDigestOfTheConfigFile(t *testing.T) {
	for _, c := range []struct {
		name string
		g    *guest
	}{
		{"plain", &guest{kind: QEMU, conf: map[string]string{"cores": "2", "memory": "2048", "name": "web"}}},
		{"description", &guest{kind: QEMU, conf: map[string]string{"description": "two lines\nwith 100% and é", "cores": "1"}}},
		{"pending", &guest{kind: LXC, conf: map[string]string{"cores": "1", "hostname": "ct"},
			pending: map[string]string{"cores": "4", "memory": "512"}, pendingDel: map[string]bool{"swap": false, "onboot": false}}},
		{"deletions only", &guest{kind: LXC, conf: map[string]string{"cores": "1"}, pendingDel: map[string]bool{"tags": false}}},
		// print_pending_delete marks a force deletion "!key".
		{"forced deletion", &guest{kind: QEMU, conf: map[string]string{"cores": "1", "scsi1": "local-lvm:vm-100-disk-1"},
			pendingDel: map[string]bool{"scsi1": true, "tags": false}}},
		{"snapshot and cloud-init", &guest{kind: QEMU,
			conf:  map[string]string{"cores": "2", "ide2": "local-lvm:vm-100-cloudinit,media=cdrom", "ciuser": "ops", "parent": "before"},
			snaps: map[string]*snapshot{"before": {conf: map[string]string{"cores": "1"}, description: "pre", snaptime: 1700000000, snapstate: "", vmstate: ""}},
			ci:    ciState{recorded: map[string]string{"ciuser": "root"}}}},
	} {
		c.g.touch()
		if c.g.digest != goldenDigests[c.name] {
			t.Errorf("%s: digest %s, want %s", c.name, c.g.digest, goldenDigests[c.name])
		}
	}
}

// goldenDigests were taken from the serialisation before it was written
// without temporary strings (issue 23).
var goldenDigests = map[string]string{
	"plain":                   "651102b7fda8086be10da51ca9c1fcd027eabfba",
	"description":             "07977663b971af0553129742c77c6f84e7742468",
	"pending":                 "ca7a4b0eda7f80c868e5bfe65889c2b5d93b691c",
	"deletions only":          "2552dd96429a547f9b8201eba08d883472513f86",
	"forced deletion":         "02b175250b33920a7e9096346d661805d21bca05",
	"snapshot and cloud-init": "13484133589a2bcbdc82d028c3a03b322da05b86",
}
