package pve

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestParseMemoryMiB(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      any
		want    int
		wantErr bool
	}{
		{"pve7 number", json.Number("2048"), 2048, false},
		{"float64", float64(2048), 2048, false},
		{"int", 4096, 4096, false},
		{"pve8 string", "2048", 2048, false},
		{"property string current", "current=2048", 2048, false},
		{"property string more keys", "current=2048,foo=bar", 2048, false},
		{"property default key first", "2048,foo=bar", 2048, false},
		{"scientific number", json.Number("2.048e+03"), 2048, false},
		{"scientific string", "2.048e+03", 2048, false},
		{"spaces", " 1024 ", 1024, false},
		{"fraction", "2048.5", 0, true},
		{"garbage", "lots", 0, true},
		{"negative", "-1", 0, true},
		{"no current", "foo=bar", 0, true},
		{"nil", nil, 0, true},
		{"bool", true, 0, true},
	} {
		got, err := ParseMemoryMiB(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("%s: ParseMemoryMiB(%#v) = %d, %v; want %d, err=%v", tc.name, tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestParseBool(t *testing.T) {
	for _, tc := range []struct {
		in      any
		want    bool
		wantErr bool
	}{
		{nil, false, false}, // absent
		{json.Number("0"), false, false},
		{json.Number("1"), true, false},
		{float64(1), true, false},
		{"0", false, false},
		{"1", true, false},
		{true, true, false},
		{false, false, false},
		{"true", true, false},
		{"off", false, false},
		{"yes", true, false},
		{json.Number("2"), false, true},
		{"maybe", false, true},
		{[]any{}, false, true},
	} {
		got, err := ParseBool(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParseBool(%#v) = %v, %v; want %v, err=%v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestParseInt(t *testing.T) {
	for _, tc := range []struct {
		in      any
		want    int64
		wantErr bool
	}{
		{json.Number("4"), 4, false},
		{"4", 4, false},
		{" 4 ", 4, false},
		{float64(4), 4, false},
		{7, 7, false},
		{json.Number("1e+10"), 10000000000, false},
		{"1.7179869184e+10", 17179869184, false},
		{json.Number("9007199254740993"), 9007199254740993, false}, // beyond float64 precision
		{"0.5", 0, true}, // cpulimit-style fraction
		{"x", 0, true},
		{nil, 0, true},
		{"NaN", 0, true},
	} {
		got, err := ParseInt(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParseInt(%#v) = %d, %v; want %d, err=%v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestValueString(t *testing.T) {
	for _, tc := range []struct {
		in     any
		want   string
		wantOK bool
	}{
		{nil, "", false},
		{"0.5", "0.5", true},
		{json.Number("2048"), "2048", true},
		{json.Number("2.048e+03"), "2048", true},
		{json.Number("0.5"), "0.5", true},
		{true, "1", true},
		{false, "0", true},
	} {
		got, ok := valueString(tc.in)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("valueString(%#v) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.wantOK)
		}
	}
}

// TestUnmarshalNumberEquivalent: the goccy/go-json decoder behind
// unmarshalNumber gives exactly encoding/json's result (UseNumber) on PVE's
// odd typing, and fails where it fails.
func TestUnmarshalNumberEquivalent(t *testing.T) {
	for _, in := range []string{
		`{"cores":2,"memory":"2048","balloon":0,"cpulimit":"1.5","vcpus":1e1,"onboot":true,"agent":"1,fstrim_cloned_disks=1"}`,
		`{"description":"a\u00e9\n b <&>","tags":"A;b","digest":"0123abcd","net0":"virtio=AA:BB:CC:DD:EE:FF,bridge=vmbr0"}`,
		`{"status":"running","uptime":"123","ha":{"managed":0},"qmpstatus":"running","lock":null,"maxmem":4294967296}`,
		`{"n":-0.0,"big":123456789012345678901234567890,"neg":-12,"exp":1.5E+3,"arr":[1,"2",{"x":null}]}`,
		`{"x":1}{"y":2}`,
		`{"dup":1,"dup":2}`,
		`{"a":"\ud83d\ude00"}`,
		`null`,
		`{"bad":}`,
		`{"a":1`,
		``,
	} {
		var want, got map[string]any
		d := json.NewDecoder(strings.NewReader(in))
		d.UseNumber()
		werr := d.Decode(&want)
		gerr := unmarshalNumber([]byte(in), &got)
		if (werr == nil) != (gerr == nil) {
			t.Errorf("%q: encoding/json error %v, goccy error %v", in, werr, gerr)
			continue
		}
		if !reflect.DeepEqual(want, got) {
			t.Errorf("%q: encoding/json %#v, goccy %#v", in, want, got)
		}
	}
}
