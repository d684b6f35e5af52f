package pve

import (
	"reflect"
	"strings"
	"testing"
)

// TestInternalKeysNotManaged: qemu-server's internal keys — vmstate,
// runningmachine, runningcpu and, from qemu-server 9.0.20,
// running-nets-host-mtu ("net0=1500,net1=1400": QemuConfig.pm
// __snapshot_save_vmstate, written with a saved VM state; the API refuses
// to set them) — are no key converge manages: a config read carrying them
// gives the same managed view, and no pending value, as one without, from
// GET …/config and from GET …/pending alike. So they never read as drift
// and converge never writes them.
func TestInternalKeysNotManaged(t *testing.T) {
	ref := GuestRef{Kind: KindQEMU, Node: "pve1", VMID: 100}
	const base = `"cores":2,"digest":"d1","memory":"2048","name":"web","net0":"virtio=BC:24:11:00:00:01,bridge=vmbr0",` +
		`"net1":"virtio=BC:24:11:00:00:02,bridge=vmbr0,mtu=1400","scsi0":"local-lvm:vm-100-disk-0,size=32G","sockets":1`
	const internal = `,"vmstate":"local-lvm:vm-100-state-suspend-2026-11-27","runningmachine":"pc-i440fx-10.1+pve0",` +
		`"runningcpu":"kvm64,enforce,+kvm_pv_eoi,+kvm_pv_unhalt,+lahf_lm,+sep","running-nets-host-mtu":"net0=1500,net1=1400"`
	plain, err := DecodeGuestConfig(ref, []byte("{"+base+"}"), []byte("[]"))
	if err != nil {
		t.Fatal(err)
	}
	with, err := DecodeGuestConfig(ref, []byte("{"+base+internal+"}"), []byte("[]"))
	if err != nil {
		t.Fatal(err)
	}
	if with.Raw["running-nets-host-mtu"] != "net0=1500,net1=1400" {
		t.Fatalf("the read lost the key: %v", with.Raw)
	}
	if !reflect.DeepEqual(with.Managed(), plain.Managed()) {
		t.Errorf("internal keys change the managed view:\n with    %+v\n without %+v", with.Managed(), plain.Managed())
	}
	if p := with.ManagedPending(); len(p) != 0 || with.HasPending() {
		t.Errorf("internal keys read as pending: %v", p)
	}

	// GET …/pending lists every key with its value.
	items := func(body string) string {
		var out []string
		for _, kv := range strings.Split(body, `,"`) {
			k, v, _ := strings.Cut(strings.TrimPrefix(kv, `"`), `":`)
			out = append(out, `{"key":"`+k+`","value":`+v+`}`)
		}
		return "[" + strings.Join(out, ",") + "]"
	}
	fromPending, err := DecodePendingConfig(ref, []byte(items(base+internal)))
	if err != nil {
		t.Fatal(err)
	}
	if fromPending.Raw["runningmachine"] == "" {
		t.Fatalf("the pending read lost runningmachine: %v", fromPending.Raw)
	}
	if !reflect.DeepEqual(fromPending.Managed(), plain.Managed()) || fromPending.HasPending() {
		t.Errorf("pending list with internal keys: %+v (pending %v), want %+v", fromPending.Managed(), fromPending.ManagedPending(), plain.Managed())
	}
}
