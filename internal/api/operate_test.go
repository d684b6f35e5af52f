package api_test

import (
	"net/http"
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
