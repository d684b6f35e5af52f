package pvesim

import (
	"errors"
	"maps"
	"testing"
)

// TestJSONParams pins how a JSON body's members become parameters: numbers
// as written, booleans 1/0, strings unescaped, null left out, arrays as
// multiple values, the last of repeated members, only the first JSON
// value of the body; an object is refused as PVE refuses it.
func TestJSONParams(t *testing.T) {
	for _, tc := range []struct {
		body string
		want map[string]string
		err  string // the 400's field error
	}{
		{`{"cores":2,"memory":"2048","cpulimit":0.5,"vcpus":1e1,"onboot":true,"template":false,"description":"a\nb \u00e9","x":null}`,
			map[string]string{"cores": "2", "memory": "2048", "cpulimit": "0.5", "vcpus": "1e1", "onboot": "1", "template": "0", "description": "a\nb é"}, ""},
		{`{"name":"a","name":"b"}`, map[string]string{"name": "b"}, ""},
		{`{"cores":1} trailing`, map[string]string{"cores": "1"}, ""},
		{`{"nameserver":["1.1.1.1","8.8.8.8"]}`, map[string]string{"nameserver": "1.1.1.1,8.8.8.8"}, ""},
		{`{"cores":[1,2]}`, nil, "type check ('integer') failed - got ARRAY"},
		{`{"cores":{"a":1}}`, nil, "type check ('string') failed - got HASH"},
		{`{"cores":`, nil, "unable to parse JSON body"},
	} {
		out := map[string]string{}
		err := jsonParams("/nodes/pve1/qemu/100/config", []byte(tc.body), out)
		var ae *apiError
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.body, err)
		case tc.err != "" && (!errors.As(err, &ae) || ae.status != 400 || len(ae.fields) != 1):
			t.Errorf("%s: %v, want a 400", tc.body, err)
		case tc.err != "":
			for _, msg := range ae.fields {
				if len(msg) < len(tc.err) || msg[:len(tc.err)] != tc.err {
					t.Errorf("%s: %q, want %q", tc.body, msg, tc.err)
				}
			}
		case !maps.Equal(out, tc.want):
			t.Errorf("%s: %q, want %q", tc.body, out, tc.want)
		}
	}
}
