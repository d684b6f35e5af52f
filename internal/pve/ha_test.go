package pve

import (
	"slices"
	"testing"
)

// TestDecodeHAResources: states default as the HA stack reads them
// (unset and "enabled" are started), entries that are no guests are left
// out, and the result is sorted by vmid.
func TestDecodeHAResources(t *testing.T) {
	got, err := decodeHAResources([]byte(`[
		{"sid":"ct:200","type":"ct","state":"enabled","digest":"d"},
		{"sid":"vm:100","type":"vm","digest":"d"},
		{"sid":"vm:101","type":"vm","state":"ignored","comment":"x"},
		{"sid":"vm:abc","type":"vm"},
		{"sid":"other:1","type":"other"}]`))
	if err != nil {
		t.Fatal(err)
	}
	want := []HAResource{
		{SID: "vm:100", Type: "vm", VMID: 100, State: "started"},
		{SID: "vm:101", Type: "vm", VMID: 101, State: "ignored"},
		{SID: "ct:200", Type: "ct", VMID: 200, State: "started"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if got, err := decodeHAResources([]byte(`null`)); err != nil || len(got) != 0 {
		t.Fatalf("null: %+v %v", got, err)
	}
	if _, err := decodeHAResources([]byte(`{"sid":1}`)); err == nil {
		t.Fatal("a malformed answer decoded")
	}
}
