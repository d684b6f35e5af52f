package pve

import (
	"reflect"
	"testing"
)

// FuzzPendingItems: the pending list decoded in place is what
// unmarshalNumber decodes, for every body, and an error where it fails.
func FuzzPendingItems(f *testing.F) {
	for _, s := range []string{
		`[{"key":"cores","value":2,"pending":4},{"key":"memory","value":"2048"},{"key":"tags","delete":1},{"key":"digest","value":"ab"}]`,
		`[]`, `null`, `[null]`, `[{"key":"a","key":null}]`, `[{"KEY":"a"}]`, `[{"key":"a","x":{"y":[1]}}]`, `[{"key":1}]`,
		`[{"key":"a\"b","value":"c\\d"}]`, `[{"key":"n","value":1e400,"pending":-0.5E-3}]`, `[{"key":"b","value":true,"delete":false}]`,
		` [ { "key" : "s" , "value" : "x y" } , { } ] `, `[{"key":"a","value":[1]}]`, "[{\"key\":\"\xff\"}]", `{"key":"a"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want []pendingItem
		werr := unmarshalNumber(b, &want)
		got, gerr := decodePendingItems(b)
		if (werr == nil) != (gerr == nil) || werr == nil && !reflect.DeepEqual(want, got) {
			t.Fatalf("%q: unmarshalNumber %#v, %v; in place %#v, %v", b, want, werr, got, gerr)
		}
	})
}

// TestPendingItemsInPlace: Proxmox's usual answer takes the fast path.
func TestPendingItemsInPlace(t *testing.T) {
	b := []byte(`[{"key":"cores","value":2,"pending":4},{"key":"digest","value":"ab12"},{"key":"tags","delete":1}]`)
	items, ok := pendingInPlace(b)
	if !ok || len(items) != 3 || items[0].Key != "cores" || items[2].Delete == nil {
		t.Fatalf("%#v, %v", items, ok)
	}
}
