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
