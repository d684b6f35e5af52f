package pve

import (
	"testing"

	"github.com/go-json-experiment/json"
)

// val decodes one JSON value as the answers' members are.
func val(t testing.TB, js string) Value {
	t.Helper()
	var v Value
	if err := json.Unmarshal([]byte(js), &v, readOpts); err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return v
}

// TestMixedTyping pins what a member reads as, whichever JSON type
// Proxmox wrote it in: a number as a JSON number or a numeric string (in
// any notation), a boolean as 0/1, "0"/"1", true/false or a spelling PVE
// accepts.
func TestMixedTyping(t *testing.T) {
	for _, tc := range []struct {
		js     string
		text   string
		int    int64 // when intOK
		intOK  bool
		flt    float64 // when fltOK
		fltOK  bool
		bool   bool // when boolOK
		boolOK bool
	}{
		{`4`, "4", 4, true, 4, true, false, false},
		{`"4"`, "4", 4, true, 4, true, false, false},
		{`" 4 "`, " 4 ", 4, true, 4, true, false, false},
		{`1e+10`, "10000000000", 10000000000, true, 1e10, true, false, false},
		{`"1.7179869184e+10"`, "1.7179869184e+10", 17179869184, true, 17179869184, true, false, false},
		{`2.048e+03`, "2048", 2048, true, 2048, true, false, false},
		{`9007199254740993`, "9007199254740993", 9007199254740993, true, 9007199254740993, true, false, false}, // beyond float64's precision
		{`"9007199254740993"`, "9007199254740993", 9007199254740993, true, 9007199254740993, true, false, false},
		{`0.5`, "0.5", 0, false, 0.5, true, false, false}, // cpulimit: a fraction is no integer
		{`"0.5"`, "0.5", 0, false, 0.5, true, false, false},
		{`1e400`, "1e400", 0, false, 0, false, false, false}, // beyond float64: kept as written
		{`0`, "0", 0, true, 0, true, false, true},
		{`1`, "1", 1, true, 1, true, true, true},
		{`2`, "2", 2, true, 2, true, false, false},
		{`"0"`, "0", 0, true, 0, true, false, true},
		{`"1"`, "1", 1, true, 1, true, true, true},
		{`true`, "1", 0, false, 0, false, true, true},
		{`false`, "0", 0, false, 0, false, false, true},
		{`"yes"`, "yes", 0, false, 0, false, true, true},
		{`"off"`, "off", 0, false, 0, false, false, true},
		{`""`, "", 0, false, 0, false, false, true},
		{`null`, "", 0, false, 0, false, false, true}, // absent: false, no number
		{`"x"`, "x", 0, false, 0, false, false, false},
		{`"NaN"`, "NaN", 0, false, 0, false, false, false},
		{`"virtio=AA:BB:CC:DD:EE:FF,bridge=vmbr0"`, "virtio=AA:BB:CC:DD:EE:FF,bridge=vmbr0", 0, false, 0, false, false, false},
		{`{"b": [1, "2"],"a":null}`, `{"b":[1,"2"],"a":null}`, 0, false, 0, false, false, false},
		{`"caf\u00e9 \"q\" \\ \n"`, "café \"q\" \\ \n", 0, false, 0, false, false, false},
		{"\"bad \xff utf8\"", "bad \uFFFD utf8", 0, false, 0, false, false, false},
	} {
		v := val(t, tc.js)
		if got := v.Text(); got != tc.text {
			t.Errorf("%s: Text %q, want %q", tc.js, got, tc.text)
		}
		if n, err := v.Int(); (err == nil) != tc.intOK || n != tc.int {
			t.Errorf("%s: Int %d, %v; want %d (ok %v)", tc.js, n, err, tc.int, tc.intOK)
		}
		if f, err := v.Float(); (err == nil) != tc.fltOK || f != tc.flt {
			t.Errorf("%s: Float %v, %v; want %v (ok %v)", tc.js, f, err, tc.flt, tc.fltOK)
		}
		if b, err := v.Bool(); (err == nil) != tc.boolOK || b != tc.bool {
			t.Errorf("%s: Bool %v, %v; want %v (ok %v)", tc.js, b, err, tc.bool, tc.boolOK)
		}
		if v.IsNull() != (tc.js == "null") {
			t.Errorf("%s: IsNull %v", tc.js, v.IsNull())
		}
	}
}

func TestParseMemoryMiB(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string // a member's JSON
		want    int
		wantErr bool
	}{
		{"pve7 number", `2048`, 2048, false},
		{"pve8 string", `"2048"`, 2048, false},
		{"property string current", `"current=2048"`, 2048, false},
		{"property string more keys", `"current=2048,foo=bar"`, 2048, false},
		{"property default key first", `"2048,foo=bar"`, 2048, false},
		{"scientific number", `2.048e+03`, 2048, false},
		{"scientific string", `"2.048e+03"`, 2048, false},
		{"spaces", `" 1024 "`, 1024, false},
		{"fraction", `"2048.5"`, 0, true},
		{"fractional number", `2048.5`, 0, true},
		{"garbage", `"lots"`, 0, true},
		{"negative", `"-1"`, 0, true},
		{"too big", `4294967296`, 0, true},
		{"no current", `"foo=bar"`, 0, true},
		{"null", `null`, 0, true},
		{"bool", `true`, 0, true},
	} {
		got, err := memoryMiB(val(t, tc.in))
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("%s: memoryMiB(%s) = %d, %v; want %d, err=%v", tc.name, tc.in, got, err, tc.want, tc.wantErr)
		}
	}
	// A config's text, as the executor holds it.
	if n, err := ParseMemoryMiB("current=4096,min=512"); err != nil || n != 4096 {
		t.Errorf("ParseMemoryMiB = %d, %v", n, err)
	}
}

func TestParseStrings(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"4", 4, false}, {" 4 ", 4, false}, {"1e+10", 10000000000, false},
		{"9007199254740993", 9007199254740993, false}, {"0.5", 0, true}, {"x", 0, true}, {"NaN", 0, true},
		{"9.3e18", 0, true}, {"", 0, true},
	} {
		got, err := ParseInt(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParseInt(%q) = %d, %v; want %d, err=%v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
	for in, want := range map[string]bool{"1": true, "0": false, "true": true, "off": false, "YES": true, "": false} {
		if got, err := ParseBool(in); err != nil || got != want {
			t.Errorf("ParseBool(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseBool("maybe"); err == nil {
		t.Error(`ParseBool("maybe"): want an error`)
	}
	if f, err := ParseFloat(" 2.5e-1 "); err != nil || f != 0.25 {
		t.Errorf("ParseFloat = %v, %v", f, err)
	}
}
