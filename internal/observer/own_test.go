package observer_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/converge-pve/converge/internal/observer"
	"github.com/converge-pve/converge/internal/pve"
)

// viewProxmox answers as a decoder that aliases its input does (goccy/go-json,
// which package pve has used): every string a view into one large answer,
// a new one per inventory and per config read.
type viewProxmox struct {
	guests int
	pass   int
}

// within returns vals as substrings of one string of at least size bytes.
func within(size int, vals ...string) []string {
	var b strings.Builder
	b.Grow(size)
	for _, v := range vals {
		b.WriteString(v)
	}
	b.WriteString(strings.Repeat(" ", max(0, size-b.Len())))
	body, at, out := b.String(), 0, make([]string, len(vals))
	for i, v := range vals {
		out[i], at = body[at:at+len(v)], at+len(v)
	}
	return out
}

func (p *viewProxmox) Inventory(context.Context) ([]pve.Resource, error) {
	p.pass++
	var vals []string
	for i := range p.guests {
		status := "running"
		if i < p.pass*10 { // ten more guests change every pass: read again
			status = "stopped"
		}
		vals = append(vals, fmt.Sprintf("pve%d", i%3+1), fmt.Sprintf("vm-%d", 100+i), status, "prod", "web", "started", "pool1")
	}
	s := within(8<<20, vals...)
	inv := make([]pve.Resource, p.guests)
	for i := range inv {
		v := s[7*i:]
		inv[i] = pve.Resource{VMID: 100 + i, Kind: pve.KindQEMU, Node: v[0], Name: v[1], Status: v[2], Tags: []string{v[3], v[4]},
			HAState: v[5], Pool: v[6], MaxCPU: 2, MaxMemMiB: 2048}
	}
	return inv, nil
}

func (p *viewProxmox) GuestConfig(_ context.Context, ref pve.GuestRef) (*pve.GuestConfig, error) {
	v := within(64<<10, fmt.Sprintf("%040x", ref.VMID), fmt.Sprintf("vm-%d", ref.VMID), "web frontend", "prod", "web",
		"scsi0", "local-lvm:vm-1-disk-0,size=8G", "net0", "virtio=BC:24:11:00:00:01,bridge=vmbr0", "cores", "4")
	return &pve.GuestConfig{Ref: ref, Digest: v[0], Name: v[1], Description: v[2], Tags: []string{v[3], v[4]}, Cores: 2, Sockets: 1,
		MemoryMiB: 2048, Raw: map[string]string{v[5]: v[6], v[7]: v[8]}, Pending: map[string]string{v[9]: v[10]}}, nil
}

func (p *viewProxmox) GuestStatus(_ context.Context, ref pve.GuestRef) (*pve.GuestStatus, error) {
	status := "running"
	if ref.VMID-100 < p.pass*10 {
		status = "stopped"
	}
	return &pve.GuestStatus{Status: within(64<<10, status)[0]}, nil
}

// TestObserverKeepsNoAnswer: what the observer keeps between passes (row
// keys, config snapshots, published observations) holds none of
// Proxmox's answers: keeping a string of one kept the whole answer.
func TestObserverKeepsNoAnswer(t *testing.T) {
	const guests, passes = 1000, 6
	oc := observer.DefaultConfig()
	oc.Name = "test"
	oc.VerifyOff = true
	o, err := observer.New(oc, &viewProxmox{guests: guests}, &benchJournal{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	for range passes {
		if _, err := o.Pass(ctx); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	// Kept answers: 6 inventories of 8 MB and 1,060 configs of 64 KB.
	if kept := int64(after.HeapAlloc) - int64(before.HeapAlloc); kept > 16<<20 {
		t.Fatalf("the observer keeps %d MB after %d passes over %d guests: Proxmox's answers are still reachable", kept>>20, passes, guests)
	}
	runtime.KeepAlive(o)
}
