package pve

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
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

// TestDecodeRowsMatchesStd: the typed path decodes rows with goccy/go-json;
// on valid JSON it must read what encoding/json reads,
// including its quirks (case-insensitive keys, the last of duplicate keys,
// invalid UTF-8 replaced: decodeResourcesTyped leaves that to
// encoding/json).
func TestDecodeRowsMatchesStd(t *testing.T) {
	for _, payload := range []string{
		`[]`,
		`null`,
		`[{"id":"qemu/100","type":"qemu","vmid":100,"node":"pve1","name":"web","status":"running","template":0,"maxcpu":2,"maxmem":2147483648,"uptime":42,"tags":"b;A","lock":"backup","cpu":0.01,"netin":5}]`,
		`[{"id":"lxc/101","type":"lxc","vmid":"101","node":"pve2","status":"unknown","template":"1","maxcpu":0.5,"maxmem":5.36870912e+08}]`,
		`[{"type":"qemu","VMID":104,"Node":"pve1","NAME":"upper"}]`,
		`[{"type":"qemu","vmid":105,"name":"first","name":"second"}]`,
		`[{"type":"qemu","vmid":106,"name":"caf\u00e9 \ud83d\ude00 \"q\" \\ \/ \n\t"}]`,
		"[{\"type\":\"qemu\",\"vmid\":107,\"name\":\"bad \xff utf8\"}]",
		`[{"type":"qemu","vmid":108,"extra":{"nested":[1,{"a":null}]},"cpu":1e-3,"tags":""}]`,
		` [ { "type" : "qemu" , "vmid" : 109 , "uptime" : -0 , "maxmem" : 1E3 } ] `,
		`[{"type":"qemu","vmid":110,"maxcpu":null,"name":null,"template":true}]`,
		`[{"type":"qemu","vmid":111,"name":7}]`,
		`[{"type":"qemu","vmid":112,"vmid":[1]}]`,
		`{"not":"an array"}`,
	} {
		var want []resourceRow
		werr := json.Unmarshal([]byte(payload), &want)
		got, gerr := decodeRows([]byte(payload))
		if (werr == nil) != (gerr == nil) {
			t.Errorf("%s: encoding/json error %v, goccy error %v", payload, werr, gerr)
			continue
		}
		if werr == nil && !reflect.DeepEqual(want, got) {
			t.Errorf("%s\nencoding/json %+v\ngoccy         %+v", payload, want, got)
		}
	}
}

// TestDecodeInventoryMatchesGeneral: the streaming, yielding decoder of a
// whole inventory answer returns what envelopeData and DecodeResources
// return, or declines; it declines every answer either of them refuses
// (malformed JSON included), and it takes the usual shape of an answer.
func TestDecodeInventoryMatchesGeneral(t *testing.T) {
	var rows []string
	for i := 0; i < 100; i++ {
		rows = append(rows, fmt.Sprintf(`{"id":"qemu/%d","type":"qemu","vmid":%d,"node":"pve%d","name":"vm-%d","status":"running","template":0,"maxcpu":2,"maxmem":2147483648,"uptime":42,"tags":"b;a","cpu":0.01}`, 500-i, 500-i, i%3, i))
	}
	usual := `{"data":[` + strings.Join(rows, ",") + `]}`
	// The first eight are answers of the usual shape: they must be taken.
	bodies := []string{
		usual,
		`{"data":[]}`,
		` {"data" : [ {"type":"lxc","vmid":"101","node":"pve2","status":"unknown","template":"1","maxcpu":0.5,"maxmem":5.36870912e+08} ] } ` + "\n",
		`{"data":[{"id":"node/pve1","type":"node","node":"pve1"},{"id":"qemu/102","type":"qemu","vmid":102,"node":"pve1","hastate":"started","pool":"prod","template":false}]}`,
		`{"data":[{"type":"qemu","VMID":104,"Node":"pve1","NAME":"upper"}]}`,
		`{"data":[{"type":"qemu","vmid":105,"name":"first","name":"second"}]}`,
		"{\"data\":[{\"type\":\"qemu\",\"vmid\":107,\"name\":\"bad \xff utf8\"}]}",
		`{"success":1,"data":[{"type":"qemu","vmid":108,"extra":{"nested":[1,{"a":null}]}}],"message":"x"}`,
		`{"data":[{"type":"qemu","vmid":111,"name":7}]}`, // the typed shape declines: the general path decides
		`{"data":[{"type":"qemu","vmid":100}],"data":[{"type":"qemu","vmid":101}]}`,
		`{"Data":[{"type":"qemu","vmid":100}]}`,
		`{"data":null}`,
		`{"data":{"type":"qemu"}}`,
		`{"success":1}`,
		`[{"type":"qemu","vmid":100}]`,
		`null`,
		``,
		`{`,
		`{"data":[{"type":"qemu","vmid":100}]`,
		`{"data":[{"type":"qemu","vmid":100},]}`,
		`{"data":[{"type":"qemu","vmid":100}]}garbage`,
		`{"data":[{"type":"qemu","vmid":100}]} {"data":[]}`,
		`{"data":[{"type":"qemu","vmid":01}]}`,
		`{"data":[{"type":"qemu","vmid":100,"name":"bad escape \q"}]}`,
		"{\"data\":[{\"type\":\"qemu\",\"vmid\":100,\"name\":\"\x01\"}]}",
		`{"data":[{"type":"qemu","vmid":100}],}`,
	}
	for i, b := range bodies {
		got, ok := decodeInventory([]byte(b), nil)
		raw, err := envelopeData([]byte(b))
		var want []Resource
		if err == nil {
			want, err = DecodeResources(raw)
		}
		if !ok {
			if i < 8 {
				t.Errorf("%.120s: declined an answer of the usual shape", b)
			}
			continue
		}
		if err != nil {
			t.Errorf("%.120s: accepted what the general path refuses (%v)", b, err)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%.120s\nstreaming %+v\ngeneral   %+v", b, got, want)
		}
	}
}

// FuzzInventoryScan: wherever scanInventory reads an inventory answer,
// encoding/json's streaming decoder reads the same guests from it.
func FuzzInventoryScan(f *testing.F) {
	for _, s := range []string{
		`{"data":[{"id":"qemu/100","type":"qemu","vmid":100,"node":"pve1","name":"web","status":"running","template":0,"maxcpu":2,"maxmem":2147483648,"uptime":42,"tags":"b;A","lock":"backup","cpu":0.0123,"netin":5}]}`,
		`{"data":[{"id":"lxc/101","type":"lxc","vmid":"101","node":"pve2","status":"unknown","template":"1","maxcpu":0.5,"maxmem":5.36870912e+08},{"id":"node/pve1","type":"node","node":"pve1"}],"total":2}`,
		`{"data":[{"type":"qemu","vmid":1.03e2,"node":"pve1","maxcpu":"4","uptime":null,"name":null,"template":true}]}`,
		`{"data":[{"type":"qemu","vmid":105,"name":"first","name":"second","name":null}]}`,
		`{"data":[{"type":"qemu","VMID":104,"Node":"pve1","NAME":"upper"}]}`,
		"{\"data\":[{\"type\":\"qemu\",\"vmid\":106,\"name\":\"caf\u00e9\",\"\u017ftatus\":\"x\"}]}",
		`{"data":[{"type":"qemu","vmid":107,"name":7}]}`,
		`{"data":[{"type":"qemu","vmid":108,"extra":{"nested":[1]}}]}`,
		` { "data" : [ { "type" : "qemu" , "vmid" : 109 , "uptime" : -0 , "maxmem" : 1E3 } , {} ] } `,
		`{"data":[]}`, `{"data":null}`, `{}`, `{"data":[{"type":"qemu","vmid":01}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fast, ok := scanInventory(body, nil)
		if !ok {
			return
		}
		slow, ok := decodeInventoryStream(body, nil)
		if !ok {
			t.Fatalf("scanned what the streaming decoder declines: %q\n%+v", body, fast)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%q\nscanned  %+v\nstreamed %+v", body, fast, slow)
		}
	})
}

// TestScanInventoryReadsTheUsualShape: the answers of Proxmox and of the
// simulator are read by the scanner, not left to the streaming decoder.
func TestScanInventoryReadsTheUsualShape(t *testing.T) {
	for _, b := range []string{
		`{"data":[{"id":"qemu/100","type":"qemu","vmid":100,"node":"pve1","name":"web","status":"running","template":0,"maxcpu":2,"maxmem":2147483648,"maxdisk":34359738368,"disk":0,"cpu":0.0123,"mem":1073741824,"netin":5,"netout":6,"diskread":7,"diskwrite":8,"uptime":42,"tags":"b;A","lock":"backup","hastate":"started","pool":"prod"}]}`,
		`{"data":[]}`,
		"{\"data\":[{\"type\":\"lxc\",\"vmid\":101,\"name\":\"caf\u00e9\"}]}",
	} {
		if _, ok := scanInventory([]byte(b), nil); !ok {
			t.Errorf("declined %s", b)
		}
	}
}
