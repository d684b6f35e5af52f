package pve

import (
	"reflect"
	"testing"
)

// TestTypedInventoryMatchesGeneric: the typed fast path reads every row
// shape exactly as the generic decoder does, or declines.
func TestTypedInventoryMatchesGeneric(t *testing.T) {
	for _, payload := range []string{
		`[]`,
		`[{"id":"qemu/100","type":"qemu","vmid":100,"node":"pve1","name":"web","status":"running","template":0,"maxcpu":2,"maxmem":2147483648,"uptime":42,"tags":"b;A","lock":"backup","cpu":0.01,"netin":5}]`,
		`[{"id":"lxc/101","type":"lxc","vmid":"101","node":"pve2","status":"unknown","template":"1","maxcpu":0.5,"maxmem":5.36870912e+08}]`,
		`[{"id":"node/pve1","type":"node","node":"pve1"},{"id":"qemu/102","type":"qemu","vmid":102,"node":"pve1","hastate":"started","pool":"prod","template":false}]`,
		`[{"id":"qemu/103","type":"qemu","vmid":1.03e2,"node":"pve1","maxcpu":"4","uptime":null}]`,
	} {
		typed, ok := decodeResourcesTyped([]byte(payload))
		if !ok {
			t.Errorf("typed path declined %s", payload)
			continue
		}
		generic, err := DecodeResources([]byte(payload))
		if err != nil {
			t.Fatal(err)
		}
		// DecodeResources itself takes the typed path: compare with the map path.
		var items []map[string]any
		if err := unmarshalNumber([]byte(payload), &items); err != nil {
			t.Fatal(err)
		}
		var slow []Resource
		for _, it := range items {
			if k := Kind(str(it["type"])); k.Valid() {
				r, err := decodeResource(k, it)
				if err != nil {
					t.Fatal(err)
				}
				slow = append(slow, r)
			}
		}
		if len(slow) == 0 {
			slow = []Resource{}
		}
		if !reflect.DeepEqual(typed, slow) || !reflect.DeepEqual(generic, slow) {
			t.Errorf("%s\ntyped   %+v\ngeneric %+v", payload, typed, slow)
		}
	}
	// A row the typed shape cannot hold falls back to the generic path.
	if _, ok := decodeResourcesTyped([]byte(`[{"type":"qemu","vmid":100,"name":7}]`)); ok {
		t.Error("typed path should decline a numeric name")
	}
}
