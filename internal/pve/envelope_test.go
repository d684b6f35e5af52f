package pve

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"

	proxmox "github.com/luthermonson/go-proxmox"
)

// TestEnvelopeMatchesGoProxmox: Client.do decodes an answer's body itself
// (once, with goccy/go-json) instead of letting go-proxmox decode it (twice,
// with encoding/json). For every body, including malformed ones, it must
// return what go-proxmox returns: the same data, or an error of the same
// class.
func TestEnvelopeMatchesGoProxmox(t *testing.T) {
	bodies := []string{
		`{"data":null}`,
		`{"data":"UPID:pve1:0001A2B3:00C4D5E6:65F0A1B2:qmconfig:101:root@pam!converge:"}`,
		`{"data":{"status":"running","vmid":101,"cpus":2.0,"name":"a\"b\u00e9","lock":""}}`,
		`{"data":[{"id":"qemu/100","vmid":100},{"id":"lxc/101","vmid":101,"tags":"a;b"}]}`,
		`{"data":[]}`,
		`{"data":0}`,
		`{"data":12345678901234567890}`,
		`{"data":"x","message":"ignored"}`,
		`{"success":1}`, // no data member: the whole body
		`{}`,
		`null`,
		`[1,2]`,
		`"just a string"`,
		`{"data":{"a":1}}` + "\n",
		` {"data" : { "a" : [ 1 , 2 ] } } `,
		`{"data":1,"data":2}`, // duplicate keys: the last wins in both
		``,
		`{`,
		`{"data":}`,
		`{"data":[1,2}`,
		`{"data":"unterminated}`,
		`{"data":1}garbage`,
		`{"data":1} {"data":2}`,
		`<html>not json</html>`,
		`{"data":nul}`,
		`{"data":"\x01"}`,
		`{"data":"bad escape \q"}`,
		`{"data":01}`,
		`{"data":1.}`,
		"{\"data\":\"\x01\"}", // a raw control character
		"{\"data\":\"\xff\"}", // invalid UTF-8 (accepted by both)
		`{"a":1,}`,
	}
	f := newFake(t)
	for i, b := range bodies {
		b := b
		f.on(http.MethodGet, "/body/"+strconv.Itoa(i), func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(b))
		})
	}
	c := f.client(t)
	px := proxmox.NewClient(f.srv.URL+apiPath, proxmox.WithAPIToken("root@pam!converge", "s"))
	for i, b := range bodies {
		path := "/body/" + strconv.Itoa(i)
		var want json.RawMessage
		werr := px.Req(bg, http.MethodGet, path, nil, &want)
		var got json.RawMessage
		gerr := c.do(bg, OpReadStatus, vm100, http.MethodGet, path, nil, &got)
		switch {
		case (werr == nil) != (gerr == nil):
			t.Errorf("%q: go-proxmox error %v, ours %v", b, werr, gerr)
		case werr != nil:
			if wc, gc := classify(OpReadStatus, werr), Classify(gerr); wc != gc {
				t.Errorf("%q: go-proxmox error %v (%s), ours %v (%s)", b, werr, wc, gerr, gc)
			}
		case !bytes.Equal(bytes.TrimSpace(want), bytes.TrimSpace(got)):
			t.Errorf("%q: go-proxmox %s, ours %s", b, want, got)
		}
	}
}

// envelopeByMap is envelopeData as it was before dataMember: the body
// decoded into a map by encoding/json.
func envelopeByMap(body []byte) (json.RawMessage, error) {
	var env map[string]json.RawMessage
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, err
	}
	d, ok := env["data"]
	if !ok {
		d = body
	}
	if isNull(d) {
		return nil, nil
	}
	return d, nil
}

// FuzzEnvelopeData: the data member found in place is what a decode into
// a map finds, for every body, and an error where that decode fails.
func FuzzEnvelopeData(f *testing.F) {
	for _, s := range []string{`{"data":null}`, `{"data":{"a":"}","b":[1,{"c":"\""}]},"x":1}`, `{"data":1,"data":2}`,
		`{"d\u0061ta":3}`, `{"message":"x"}`, ` {"data" : [ ] } `, `[1]`, `"s"`, `{}`, `{"data":"\\"}`, `{"a":{"data":1},"data":true}`,
		`{"data":-1.5e3,"z":null}`, "{\"data\":\"\xff\"}", `{"da":1,"data":"x"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		want, werr := envelopeByMap(body)
		got, gerr := envelopeData(body)
		if (werr == nil) != (gerr == nil) || !bytes.Equal(want, got) {
			t.Fatalf("%q: by map %q, %v; found %q, %v", body, want, werr, got, gerr)
		}
	})
}

// TestEnvelopeDataInPlace: the common answer's data is a slice of the
// body, not a copy.
func TestEnvelopeDataInPlace(t *testing.T) {
	body := []byte(`{"data":{"digest":"abc","cores":2}}`)
	d, err := envelopeData(body)
	if err != nil || string(d) != `{"digest":"abc","cores":2}` {
		t.Fatalf("%q, %v", d, err)
	}
	if &d[0] != &body[8] {
		t.Fatal("data copied")
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = envelopeData(body) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}
