package pvesim

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
)

// TestEncodeDataEquivalent: encodeData writes byte for byte what
// encoding/json writes for the simulator's own answers, and the same JSON
// for hand-made values of every kind it answers with (goccy writes 1e-07
// where encoding/json writes 1e-7: equal numbers).
func TestEncodeDataEquivalent(t *testing.T) {
	made := []any{
		map[string]any{"data": nil},
		map[string]any{"data": map[string]any{"cores": 2, "memory": "2048", "cpu": 0.0123, "maxmem": int64(4294967296),
			"big": 1e21, "small": 1e-7, "neg": -1.5, "template": false, "ha": map[string]any{"managed": 0}}},
		map[string]any{"data": "UPID:pve1:0001A2B3:00C4D5E6:65F0A1B2:qmconfig:101:root@pam!converge:"},
		map[string]any{"data": []map[string]any{{"key": "description", "value": "a <b> & c\u2028\u00e9\n"}, {"key": "delete", "delete": 1}}},
		map[string]any{"data": []any{}, "total": 0},
		map[string]any{"data": []string{"x", ""}},
	}
	for _, v := range made {
		want, werr := json.Marshal(v)
		got, gerr := encodeData(v)
		var w, g any
		if werr != nil || gerr != nil || json.Unmarshal(want, &w) != nil || json.Unmarshal(got, &g) != nil || !reflect.DeepEqual(w, g) {
			t.Errorf("encoding/json %s (%v)\ngoccy         %s (%v)", want, werr, got, gerr)
		}
	}
	var values []any
	s, err := New(Options{Nodes: 2, Guests: 6, Tokens: map[string]string{"root@pam!t": "s"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // test-only: self-signed simulator cert
	for _, path := range []string{"/version", "/nodes", "/cluster/resources?type=vm", "/cluster/tasks",
		"/nodes/pve1/qemu", "/nodes/pve1/lxc", "/nodes/pve1/qemu/100/config", "/nodes/pve1/qemu/100/config?current=1",
		"/nodes/pve1/qemu/100/pending", "/nodes/pve1/qemu/100/status/current"} {
		req, _ := http.NewRequest(http.MethodGet, s.URL()+path, nil)
		req.Header.Set("Authorization", "PVEAPIToken=root@pam!t=s")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatalf("%s: %v (%s %s)", path, err, resp.Status, body)
		}
		values = append(values, v)
	}
	envelopes := 0
	for _, v := range values {
		want, werr := json.Marshal(v)
		got, gerr := encodeData(v)
		if werr != nil || gerr != nil || !bytes.Equal(want, got) {
			t.Errorf("encoding/json %s (%v)\ngoccy         %s (%v)", want, werr, got, gerr)
		}
		// writeData's envelope without a map: the same bytes.
		if env := v.(map[string]any); len(env) == 1 {
			envelopes++
			if got, err := encodeEnvelope(env["data"]); err != nil || !bytes.Equal(want, got) {
				t.Errorf("encodeEnvelope %s (%v)\nencoding/json  %s", got, err, want)
			}
		}
	}
	if envelopes < 10 {
		t.Errorf("only %d answers compared as envelopes", envelopes)
	}
}

// TestEncodeListEquivalent: a long list answer, encoded an entry at a time
// with yields in between, is byte for byte what encoding/json writes for it
// (and what writeData sends), across several batches and both row shapes.
func TestEncodeListEquivalent(t *testing.T) {
	s, err := New(Options{Nodes: 2, Guests: 3*resourcesLockRows + 7, DemoTemplates: true}) // VMs, containers, templates; several lock batches
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"vm", ""} {
		v, err := s.clusterResources(&req{params: map[string]string{"type": typ}})
		if err != nil {
			t.Fatal(err)
		}
		list := v.([]any)
		if len(list) <= longList {
			t.Fatalf("type=%q: %d entries, too few to take the batched path", typ, len(list))
		}
		want, err := json.Marshal(map[string]any{"data": list})
		if err != nil {
			t.Fatal(err)
		}
		got, err := encodeList(list)
		if err != nil || !bytes.Equal(want, got) {
			t.Fatalf("type=%q: encodeList differs from encoding/json (%v)\n%.300s\n%.300s", typ, err, got, want)
		}
		rec := httptest.NewRecorder()
		writeData(rec, v)
		if !bytes.Equal(rec.Body.Bytes(), want) {
			t.Fatalf("type=%q: writeData sent %.300s", typ, rec.Body.Bytes())
		}
	}
}
