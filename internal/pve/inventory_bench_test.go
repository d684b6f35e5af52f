package pve

import (
	"fmt"
	"strings"
	"testing"
)

// inventoryAnswer is an answer of GET /cluster/resources?type=vm for n
// guests on three nodes, shaped as Proxmox (and the simulator) write it.
func inventoryAnswer(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"data":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		vmid := 100 + i
		fmt.Fprintf(&b, `{"id":"qemu/%d","type":"qemu","vmid":%d,"node":"pve%d","name":"vm-%d","status":"running","template":0,`+
			`"cpu":0.0123,"maxcpu":2,"mem":536870912,"maxmem":2147483648,"disk":0,"maxdisk":34359738368,`+
			`"netin":1234,"netout":5678,"diskread":0,"diskwrite":0,"uptime":%d,"tags":"converge;web"}`, vmid, vmid, i%3+1, vmid, 3600+i)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// BenchmarkInventoryDecode reads a whole inventory answer into Resources,
// unpaced: the observer's CPU for it every pass.
func BenchmarkInventoryDecode(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		body := inventoryAnswer(n)
		b.Run(fmt.Sprintf("guests=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				res, err := decodeInventory(body, nil)
				if err != nil || len(res) != n {
					b.Fatalf("%d guests, %v", len(res), err)
				}
			}
		})
	}
}
