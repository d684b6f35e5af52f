package pvesim

import (
	"bytes"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	jsonv1 "github.com/go-json-experiment/json/v1"
)

// TestEncodeGolden pins the bytes the simulator writes for values of
// every kind it answers with: keys of a map sorted, struct members in
// their order, numbers as encoding/json wrote them (1e+21, 1e-7), <, >, &
// and U+2028 escaped, nil lists as null, a member with omitzero left out
// only when it is the Go zero value (an empty string is written).
func TestEncodeGolden(t *testing.T) {
	name, cpu, mem := "web", 0.5, int64(1<<30)
	for _, tc := range []struct {
		v    any
		want string
	}{
		{map[string]any{"data": nil}, `{"data":null}`},
		{map[string]any{"data": map[string]any{"cores": 2, "memory": "2048", "cpu": 0.0123, "maxmem": int64(4294967296),
			"big": 1e21, "small": 1e-7, "neg": -1.5, "template": false, "ha": map[string]any{"managed": 0}}},
			`{"data":{"big":1e+21,"cores":2,"cpu":0.0123,"ha":{"managed":0},"maxmem":4294967296,"memory":"2048","neg":-1.5,"small":1e-7,"template":false}}`},
		{map[string]any{"data": "a <b> & c\u2028\u00e9\n\"\\"}, `{"data":"a \u003cb\u003e \u0026 c\u2028` + "\u00e9" + `\n\"\\"}`},
		{map[string]any{"data": []any{}, "total": 0}, `{"data":[],"total":0}`},
		{map[string]any{"data": []string(nil)}, `{"data":null}`},
		{map[string]any{"data": map[string]any(nil)}, `{"data":null}`},
		{[]pendingItem{{Key: "description", Value: ""}, {Key: "cores", Value: int64(2), Pending: int64(4)}, {Key: "tags", Delete: 1}},
			`[{"key":"description","value":""},{"key":"cores","value":2,"pending":4},{"key":"tags","delete":1}]`},
		{vmResource{ID: "qemu/100", Type: "qemu", VMID: 100, Node: "pve1", Status: "unknown"},
			`{"id":"qemu/100","type":"qemu","vmid":100,"node":"pve1","status":"unknown","template":0,"cpu":0,"mem":0,"disk":0,"maxdisk":0,"netin":0,"netout":0,"diskread":0,"diskwrite":0,"uptime":0}`},
		{vmResource{ID: "lxc/101", Type: "lxc", VMID: 101, Node: "pve2", Name: &name, Status: "running", MaxCPU: &cpu, MaxMem: &mem, Tags: "a;b"},
			`{"id":"lxc/101","type":"lxc","vmid":101,"node":"pve2","name":"web","status":"running","template":0,"tags":"a;b","cpu":0,"maxcpu":0.5,"mem":0,"maxmem":1073741824,"disk":0,"maxdisk":0,"netin":0,"netout":0,"diskread":0,"diskwrite":0,"uptime":0}`},
		{&vmResource{ID: "qemu/102", Type: "qemu", VMID: 102, Node: "pve1", Status: "stopped", Tags: "a<b>&c", Lock: "backup", HAState: "started", Pool: "p"},
			`{"id":"qemu/102","type":"qemu","vmid":102,"node":"pve1","status":"stopped","template":0,"lock":"backup","tags":"a\u003cb\u003e\u0026c","cpu":0,"mem":0,"disk":0,"maxdisk":0,"netin":0,"netout":0,"diskread":0,"diskwrite":0,"uptime":0,"hastate":"started","pool":"p"}`},
		// Invalid UTF-8 (a form body may carry it) is written as U+FFFD.
		{"bad \xff", "\"bad \uFFFD\""},
	} {
		got, err := encodeData(tc.v)
		if err != nil || string(got) != tc.want {
			t.Errorf("%#v\ngot  %s (%v)\nwant %s", tc.v, got, err, tc.want)
		}
	}
}

// TestEncodeAsBefore: the simulator's own answers are byte for byte what
// encoding/json wrote for them (its semantics: package json/v1), which
// the simulator sent until it moved to json v2: a client comparing
// answers sees none change.
func TestEncodeAsBefore(t *testing.T) {
	s, err := New(Options{Nodes: 2, Guests: 6, DemoTemplates: true, Tokens: map[string]string{"root@pam!t": "s"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // test-only: self-signed simulator cert
	for _, path := range []string{"/version", "/nodes", "/cluster/resources?type=vm", "/cluster/resources", "/cluster/tasks",
		"/nodes/pve1/qemu", "/nodes/pve1/lxc", "/nodes/pve1/qemu/100/config", "/nodes/pve1/qemu/100/config?current=1",
		"/nodes/pve1/qemu/100/pending", "/nodes/pve1/qemu/100/status/current", "/nodes/pve2/lxc/102/status/current",
		"/cluster/status", "/nodes/pve1/status", "/pools", "/nodes/pve1/storage"} {
		req, _ := http.NewRequest(http.MethodGet, s.URL()+path, nil)
		req.Header.Set("Authorization", "PVEAPIToken=root@pam!t=s")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		// Decoded into generic values, the answer re-encodes to itself
		// wherever the simulator wrote maps; and either encoder writes
		// the same bytes for it.
		d := jsonv1.NewDecoder(bytes.NewReader(body))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			t.Fatalf("%s: %v (%s %s)", path, err, resp.Status, body)
		}
		want, werr := jsonv1.Marshal(v)
		got, gerr := encodeData(v)
		if werr != nil || gerr != nil || !bytes.Equal(want, got) {
			t.Errorf("%s: encoding/json %s (%v)\nsimulator     %s (%v)", path, want, werr, got, gerr)
		}
	}
	// The typed answers, encoded from their Go values; the rows' own
	// encoder against their json tags.
	type plainResource vmResource // without MarshalJSONTo
	for _, typ := range []string{"vm", ""} {
		v, err := s.clusterResources(&req{params: map[string]string{"type": typ}})
		if err != nil {
			t.Fatal(err)
		}
		plain := slices.Clone(v.([]any))
		for i, e := range plain {
			if r, ok := e.(*vmResource); ok {
				plain[i] = (*plainResource)(r)
			}
		}
		want, err := jsonv1.Marshal(map[string]any{"data": plain})
		if err != nil {
			t.Fatal(err)
		}
		got, err := encodeEnvelope(v)
		if err != nil || !bytes.Equal(want, got) {
			t.Fatalf("type=%q: encoding/json %.300s\nsimulator %.300s (%v)", typ, want, got, err)
		}
	}
	g := s.guests[100]
	pending, err := s.getPending(&req{}, g)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []any{pending, s.statusJSON(g, false), s.statusJSON(g, true), s.Guests(), s.Faults()} {
		want, werr := jsonv1.Marshal(v)
		got, gerr := encodeData(v)
		if werr != nil || gerr != nil || !bytes.Equal(want, got) {
			t.Errorf("%T: encoding/json %s (%v)\nsimulator     %s (%v)", v, want, werr, got, gerr)
		}
	}
}

// TestEncodeListEquivalent: a long list answer, encoded an entry at a time
// with yields in between, is byte for byte what it is encoded in one
// piece (and what writeData sends), across several batches and both row
// shapes.
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
		want, err := encodeData(map[string]any{"data": list})
		if err != nil {
			t.Fatal(err)
		}
		got, err := encodeList(list)
		if err != nil || !bytes.Equal(want, got) {
			t.Fatalf("type=%q: encodeList differs from encodeData (%v)\n%.300s\n%.300s", typ, err, got, want)
		}
		rec := httptest.NewRecorder()
		writeData(rec, v)
		if !bytes.Equal(rec.Body.Bytes(), want) {
			t.Fatalf("type=%q: writeData sent %.300s", typ, rec.Body.Bytes())
		}
	}
}
