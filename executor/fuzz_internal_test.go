package executor

import (
	"testing"

	"github.com/converge-pve/converge/events"
)

// FuzzDecodeAction: what an executor takes off pve.action.… is either
// refused, or an action with an id, for the subject's guest and this
// cluster; never a panic.
func FuzzDecodeAction(f *testing.F) {
	f.Add("pve.action.default.101.03", []byte(`{"id":"a1","vmid":101,"cluster":"default","node":"pve1","kind":"qemu","op":"set_config","set":{"cores":"2"},"desired_seq":3,"basis_seq":5}`))
	f.Add("pve.action.default.101", []byte(`{"id":"a1","vmid":101,"op":"stop"}`))
	f.Add("pve.action.other.101", []byte(`{"id":"a1","vmid":101,"cluster":"other","op":"stop"}`))
	f.Add("pve.desired.default.101", []byte(`{"id":"a1","vmid":101,"op":"stop"}`))
	f.Add("pve.action.default.102", []byte(`{"id":"a1","vmid":101,"op":"start","set":{"hookscript":"local:snippets/x.sh"}}`))
	f.Add("pve.action.default.101", []byte(`{"id":"","vmid":101}`))
	f.Fuzz(func(t *testing.T, subject string, data []byte) {
		a, err := decodeAction(subject, data, events.DefaultCluster)
		if err != nil {
			return
		}
		info, perr := events.ParseSubject(subject)
		switch {
		case perr != nil || info.Kind != events.KindAction || info.Cluster != events.DefaultCluster:
			t.Fatalf("accepted an action on %q", subject)
		case a.ID == "":
			t.Fatal("accepted an action without an id")
		case a.VMID != info.VMID:
			t.Fatalf("accepted an action for %d on the subject of %d", a.VMID, info.VMID)
		case a.Cluster != "" && a.Cluster != events.DefaultCluster:
			t.Fatalf("accepted an action of cluster %q", a.Cluster)
		}
	})
}
