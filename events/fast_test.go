package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"pgregory.net/rapid"
)

// schemaDecode is DecodeDesired without the fast path.
func schemaDecode(body []byte) (*Desired, error) {
	sch, err := compiled()
	if err != nil {
		return nil, err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if err := sch.Validate(inst); err != nil {
		return nil, err
	}
	var d Desired
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return nil, err
	}
	return &d, nil
}

// genBody draws desired bodies near the edges of the schema: right and
// wrong types, out-of-range numbers, nulls, case variants of field names,
// floats, odd strings, unknown fields.
func genBody(t *rapid.T) []byte {
	pick := func(label string, xs ...string) string { return rapid.SampledFrom(xs).Draw(t, label) }
	fields := map[string]string{
		"vmid":        pick("vmid", "101", "100", "99", "999999999", "1000000000", "1e2", "101.0", `"101"`, "null", "-5", "-0", "99999999999999999999", "true"),
		"kind":        pick("kind", `"qemu"`, `"lxc"`, `"QEMU"`, `"vm"`, "1", "null"),
		"power":       pick("power", `"running"`, `"stopped"`, `"on"`, `""`, "true"),
		"cores":       pick("cores", "1", "4", "0", "8192", "8193", "2.5", "4.0", `"4"`, "null"),
		"memory_mib":  pick("mem", "16", "15", "2048", "268435456", "268435457", "1e3"),
		"name":        pick("name", `"web-1"`, `"web\u002d1"`, `"web\/1"`, `"a.b"`, `"-x"`, `"x-"`, `"a..b"`, `""`, `"é"`, `"`+strings.Repeat("a", 256)+`"`, "7"),
		"description": pick("desc", `"hello"`, `"nullable"`, `"a\u0000b"`, `"lone \ud800 half"`, `"\udc00"`, `""`, `"two\nlines"`, `"a\"b\\c"`, `"caf\u00e9 \ud83d\ude00"`, "\"bad \xff utf8\"", "\"caf\u00e9 raw\"", `"`+strings.Repeat("é", 8192)+`"`, `"`+strings.Repeat("x", 8193)+`"`, "[]"),
		"tags":        pick("tags", `[]`, `["a"]`, `["a","B+c.d-e"]`, `["-a"]`, `["a b"]`, `[1]`, `"a"`, `[null]`, `["`+strings.Repeat("t", 129)+`"]`),
		"onboot":      pick("onboot", "true", "false", "1", `"true"`, "null"),
		"absent":      pick("absent", "true", "false", "0"),
		"restart":     pick("restart", `"never"`, `"allowed"`, `"Never"`, `""`, "false"),
		"node":        pick("node", `"pve1"`, `"-pve"`, `""`), // not the fast path's: the schema decides
		"clone":       pick("clone", `{"from":9000}`, `{"from":9000,"node":""}`, `{"from":9000,"pool":""}`, `{"from":9000,"full":null}`, `{"node":"pve1"}`, `{"from":9000,"from":9001}`, `{"from":9000,"node":"pve1","full":true,"storage":"local-lvm"}`, `{}`, `{"from":9000,"x":1}`, `{"from":9000,"node":"-bad"}`, `{"from":"9000"}`, `{"from":9000,"storage":"1x"}`, `{"from":9000,"full":true,"storage":"local-"}`, `{"from":9000,"full":true,"storage":"l"}`),
	}
	var parts []string
	for _, k := range []string{"vmid", "kind", "power", "cores", "memory_mib", "name", "description", "tags", "onboot", "absent", "restart", "node", "clone"} {
		if k == "vmid" && rapid.IntRange(0, 9).Draw(t, "drop-vmid") == 0 {
			continue
		}
		if k != "vmid" && !rapid.Bool().Draw(t, "has-"+k) {
			continue
		}
		key := k
		switch rapid.IntRange(0, 15).Draw(t, "case-"+k) {
		case 0:
			key = strings.ToUpper(k[:1]) + k[1:] // encoding/json matches this; the schema does not
		case 1:
			key = `\u00` + strconv.FormatInt(int64(k[0]), 16) + k[1:] // the same name, escaped
		}
		parts = append(parts, `"`+key+`":`+fields[k])
	}
	if rapid.IntRange(0, 10).Draw(t, "unknown") == 0 {
		parts = append(parts, `"colour":"red"`)
	}
	if len(parts) > 0 && rapid.IntRange(0, 5).Draw(t, "twice") == 0 {
		parts = append(parts, rapid.SampledFrom(parts).Draw(t, "again")) // a key given twice
	}
	body := "{" + strings.Join(parts, ",") + "}"
	switch rapid.IntRange(0, 12).Draw(t, "tail") {
	case 0:
		body += ` {"vmid":102}` // a second value
	case 1:
		body += " \n"
	}
	return []byte(body)
}

// TestFastPathAgreesWithSchema: whatever the fast path accepts, checkStrict
// and the schema accept, and it decodes to the same value; and the fast
// path accepts the common valid bodies (or it would be no fast path).
func TestFastPathAgreesWithSchema(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		body := genBody(t)
		fast, ok := fastDecode(body)
		if !ok {
			return
		}
		if err := checkStrict(body); err != nil {
			t.Fatalf("fast path accepted %s, which checkStrict refuses: %v", body, err)
		}
		slow, err := schemaDecode(body)
		if err != nil {
			t.Fatalf("fast path accepted %s, the schema rejects it: %v", body, err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("decoded differently: %s\nfast %+v\nslow %+v", body, fast, slow)
		}
	})
	// Acceptance is checked on plain valid bodies, not left to chance.
	for _, body := range []string{
		`{"vmid":101}`,
		`{"vmid":101,"kind":"qemu","power":"running","cores":4,"memory_mib":8192,"name":"web-1","description":"x","tags":["a","b"],"onboot":true}`,
		`{"vmid":101,"absent":true}`,
		`{"vmid":101,"clone":{"from":9000,"full":true}}`,
		`{"vmid":101,"clone":{"from":9000,"node":"pve1","full":true,"storage":"local-lvm","pool":"p"},"restart":"allowed"}`,
		`{"vmid":101,"name":"web\u002d1","description":"caf\u00e9 \ud83d\ude00 \"<&>\"","tags":[]}`,
	} {
		if _, ok := fastDecode([]byte(body)); !ok {
			t.Errorf("fast path refused a plain valid body %s", body)
		}
	}
	// Refusals the schema must then explain: still rejected, with fields.
	for _, body := range []string{`{"VMID":101}`, `{"vmid":101,"cores":null}`, `{"vmid":101,"cores":4.0,"power":"on"}`} {
		_, err := DecodeDesired([]byte(body), 101)
		var ve *ValidationError
		if !errors.As(err, &ve) && body != `{"vmid":101,"cores":4.0,"power":"on"}` {
			t.Errorf("%s: %v", body, err)
		}
	}
}
