package api_test

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/projector"
)

// DELETE /v1/desired/{vmid} journals a release naming the token; POST
// /v1/approve an approval. Read-only tokens and bad bodies publish nothing.
func TestReleaseAndApprove(t *testing.T) {
	f := newFixture(t)
	p := projector.New("pve")
	fold := func(seq uint64) {
		t.Helper()
		m, err := f.stream.GetMsg(f.ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if ch := p.Apply(projector.Event{Seq: m.Sequence, Subject: m.Subject, Header: events.Header(m.Header), Data: m.Data, Time: m.Time}); ch.Err != nil {
			t.Fatal(ch.Err)
		}
	}
	r := f.do(t, "POST", "/v1/desired/101", []byte(`{"vmid":101,"power":"running"}`))
	if r.code != http.StatusAccepted {
		t.Fatalf("desire: %d %s", r.code, r.body)
	}
	fold(decodeJSON[accepted](t, r).Seq)

	if r := f.do(t, "DELETE", "/v1/desired/101", nil, "Authorization", "Bearer "+viewerToken); r.code != http.StatusForbidden {
		t.Fatalf("release with a read token: %d %s", r.code, r.body)
	}
	before := f.msgs(t)
	r = f.do(t, "DELETE", "/v1/desired/101", nil)
	if r.code != http.StatusAccepted {
		t.Fatalf("release: %d %s", r.code, r.body)
	}
	got := decodeJSON[struct {
		Seq uint64 `json:"seq"`
		By  string `json:"by"`
	}](t, r)
	if got.By != "token:portal" || f.msgs(t) != before+1 {
		t.Fatalf("release response %+v, %d events", got, f.msgs(t)-before)
	}
	fold(got.Seq)
	if v := p.Views[101]; v.Desired != nil || v.Released == nil || v.Released.By != "token:portal" || v.Released.Seq != got.Seq {
		t.Fatalf("released view %+v", v)
	}

	before = f.msgs(t)
	for _, bad := range []string{`{}`, `{"vmids":[1]}`, `{"all":true,"vmids":[101]}`, `{"vmid":101}`, `[101]`} {
		if r := f.do(t, "POST", "/v1/approve", []byte(bad)); r.code != http.StatusBadRequest {
			t.Errorf("approve %s: %d %s", bad, r.code, r.body)
		}
	}
	if f.msgs(t) != before {
		t.Fatal("a refused approval was journalled")
	}
	r = f.do(t, "POST", "/v1/approve", []byte(`{"all":true}`))
	if r.code != http.StatusAccepted {
		t.Fatalf("approve: %d %s", r.code, r.body)
	}
	fold(decodeJSON[accepted](t, r).Seq)
	if a := p.State.ApprovedAll; a == nil || a.By != "token:portal" {
		t.Fatalf("approval not folded: %+v", a)
	}
}

// POST /v1/pause, resume, release and approve journal the request with
// the token's name and the reason, and answer what was journalled; a body
// the contract refuses is a 400 with nothing published.
func TestOperatorRequests(t *testing.T) {
	f := newFixture(t)
	type answer struct {
		Command string `json:"command"`
		VMIDs   []int  `json:"vmids"`
		All     bool   `json:"all"`
		Cluster string `json:"cluster"`
		Seq     uint64 `json:"seq"`
		By      string `json:"by"`
		Reason  string `json:"reason"`
	}
	for _, tc := range []struct {
		path, body string
		want       answer
	}{
		{"/v1/pause", `{"all":true,"reason":"node swap on pve2"}`, answer{Command: "pause", All: true, Reason: "node swap on pve2"}},
		{"/v1/resume", `{"all":true}`, answer{Command: "resume", All: true}},
		{"/v1/approve", `{"vmids":[101,102],"reason":"CHG-42"}`, answer{Command: "approve", VMIDs: []int{101, 102}, Reason: "CHG-42"}},
		{"/v1/release", `{"vmids":[103],"reason":"handed to the DB team"}`, answer{Command: "release", VMIDs: []int{103}, Reason: "handed to the DB team"}},
	} {
		r := f.do(t, "POST", tc.path, []byte(tc.body))
		if r.code != http.StatusAccepted {
			t.Fatalf("%s %s: %d %s", tc.path, tc.body, r.code, r.body)
		}
		got := decodeJSON[answer](t, r)
		want := tc.want
		want.Cluster, want.Seq, want.By = "pve", got.Seq, "token:portal"
		if !reflect.DeepEqual(got, want) || got.Seq == 0 {
			t.Fatalf("%s answered %+v, want %+v", tc.path, got, want)
		}
		m, err := f.stream.GetMsg(f.ctx, got.Seq)
		if err != nil {
			t.Fatal(err)
		}
		c, err := events.Decode[events.Control](m.Data)
		if err != nil || c.Command != want.Command || c.Reason != want.Reason || c.Publisher != "token:portal" || c.All != want.All ||
			!reflect.DeepEqual(c.VMIDs, want.VMIDs) {
			t.Fatalf("%s journalled %+v %v", tc.path, c, err)
		}
	}

	before := f.msgs(t)
	for _, bad := range []struct{ path, body, says string }{
		{"/v1/release", `{"all":true}`, "--all is not accepted"},
		{"/v1/pause", `{"vmids":[101],"why":"x"}`, "unknown"},
		// Found by review: the v1 decoder replaced bad bytes with U+FFFD
		// and matched names without case; both were journalled.
		{"/v1/pause", "{\"vmids\":[101],\"reason\":\"bad \xff\"}", "invalid UTF-8"},
		{"/v1/pause", `{"vmids":[101],"reason":"\ud800"}`, "invalid"},
		{"/v1/pause", `{"vmids":[101],"REASON":"case","reason":"dup"}`, "unknown"},
		{"/v1/pause", `{"vmids":[101],"reason":"a","reason":"b"}`, "duplicate"},
		{"/v1/approve", `{"vmids":[101],"reason":"rtl \u202e"}`, "character U+202E"},
		{"/v1/resume", `{"vmids":[101],"reason":"two\nlines"}`, "reason: character U+000A"},
		{"/v1/approve", `{"vmids":[101],"reason":"` + strings.Repeat("x", 1025) + `"}`, "reason: at most 1024 bytes"},
		{"/v1/pause", `{"vmids":[101]} {"all":true}`, "want one object"},
		{"/v1/pause", `{}`, "name at least one guest"},
	} {
		r := f.do(t, "POST", bad.path, []byte(bad.body))
		if r.code != http.StatusBadRequest || !strings.Contains(string(r.body), bad.says) || !strings.Contains(string(r.body), "nothing was published") {
			t.Errorf("%s %.40s: %d %s, want 400 saying %q", bad.path, bad.body, r.code, r.body, bad.says)
		}
	}
	if r := f.do(t, "POST", "/v1/pause", []byte(`{"all":true}`), "Authorization", "Bearer "+viewerToken); r.code != http.StatusForbidden {
		t.Errorf("pause with a read token: %d %s", r.code, r.body)
	}
	if f.msgs(t) != before {
		t.Fatal("a refused request was journalled")
	}
}
