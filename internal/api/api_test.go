package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/api"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/bus/bustest"
	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
	"github.com/converge-pve/converge/projector"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

type fixture struct {
	ctx    context.Context
	bus    *bus.Bus
	kv     jetstream.KeyValue
	stream jetstream.Stream
	server *api.Server
	h      http.Handler
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	b := bustest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	kv, err := b.Views(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := b.Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "converge_test_total", Help: "A test counter."})
	reg.MustRegister(c)
	c.Add(3)
	store, err := b.ViewStore()
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := api.ParseTokens("test", []byte(testTokens))
	if err != nil {
		t.Fatal(err)
	}
	s := &api.Server{Cluster: "pve", Views: views.Reader{Store: store, Cluster: "pve"}, Journal: b,
		Gatherer: reg, Logger: zerolog.Nop(), Guard: api.Guard{Tokens: tokens}}
	return &fixture{ctx: ctx, bus: b, kv: kv, stream: stream, server: s, h: s.Handler()}
}

type response struct {
	code int
	hdr  http.Header
	body []byte
}

// The fixture's tokens: portal may write, viewer only read.
const (
	portalToken = "portal-0123456789abcdef"
	viewerToken = "viewer-0123456789abcdef"
	testTokens  = `tokens:
  - {name: portal, scope: write, token: ` + portalToken + `}
  - {name: viewer, scope: read, token: ` + viewerToken + `}
`
)

// do sends a request as a well-behaved client would (the server's own
// Host, JSON bodies, the portal token); hdr overrides, "" removes.
func (f *fixture) do(t *testing.T, method, path string, body []byte, hdr ...string) response {
	t.Helper()
	req := httptest.NewRequestWithContext(f.ctx, method, path, bytes.NewReader(body))
	req.Host = "127.0.0.1:8080"
	req.Header.Set("Authorization", "Bearer "+portalToken)
	if method == "POST" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		switch {
		case hdr[i] == "Host":
			req.Host = hdr[i+1]
		case hdr[i+1] == "":
			req.Header.Del(hdr[i])
		default:
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	b, _ := io.ReadAll(rec.Result().Body)
	return response{code: rec.Code, hdr: rec.Result().Header, body: b}
}

func decodeJSON[T any](t *testing.T, r response) T {
	t.Helper()
	if ct := r.hdr.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	var v T
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("response is not JSON: %v\n%s", err, r.body)
	}
	return v
}

func (f *fixture) msgs(t *testing.T) uint64 {
	t.Helper()
	info, err := f.stream.Info(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func TestHealthAndMetrics(t *testing.T) {
	f := newFixture(t)
	r := f.do(t, "GET", "/healthz", nil)
	if r.code != http.StatusOK || decodeJSON[map[string]string](t, r)["status"] != "ok" {
		t.Fatalf("/healthz %d %s", r.code, r.body)
	}
	r = f.do(t, "GET", "/metrics", nil)
	if r.code != http.StatusOK || !strings.HasPrefix(r.hdr.Get("Content-Type"), "text/plain") {
		t.Fatalf("/metrics %d %q", r.code, r.hdr.Get("Content-Type"))
	}
	if !strings.Contains(string(r.body), "converge_test_total 3") {
		t.Fatalf("/metrics does not expose the gatherer's metrics:\n%s", r.body)
	}
}

func TestReadyz(t *testing.T) {
	f := newFixture(t)
	var checks []api.Check
	f.server.Checks = func() []api.Check { return checks }
	h := f.server.Handler()
	get := func() (int, api.Readiness) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequestWithContext(f.ctx, "GET", "/readyz", nil))
		var m api.Readiness
		if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
			t.Fatalf("/readyz body %q: %v", rec.Body, err)
		}
		return rec.Code, m
	}
	checks = []api.Check{{Name: "journal", OK: true}, {Name: "planner", OK: true}}
	if code, m := get(); code != http.StatusOK || m.Status != "ready" || len(m.Checks) != 2 || m.Reason != "" {
		t.Fatalf("ready: %d %+v", code, m)
	}
	// Every failing check is named, with its reason; passing ones are listed.
	checks = []api.Check{
		{Name: "journal", OK: false, Reason: "JetStream refuses writes: stream sealed"},
		{Name: "planner", OK: true},
		{Name: "proxmox", OK: false, Reason: "Proxmox rejects the credentials: 401"},
	}
	code, m := get()
	if code != http.StatusServiceUnavailable || m.Status != "not ready" || len(m.Checks) != 3 ||
		m.Reason != "journal: JetStream refuses writes: stream sealed; proxmox: Proxmox rejects the credentials: 401" {
		t.Fatalf("not ready: %d %+v", code, m)
	}
	// No checks: ready (liveness only).
	f.server.Checks = nil
	h = f.server.Handler()
	if code, m := get(); code != http.StatusOK || m.Status != "ready" {
		t.Fatalf("without checks: %d %+v", code, m)
	}
}

type accepted struct {
	VMID    int    `json:"vmid"`
	Cluster string `json:"cluster"`
	Seq     uint64 `json:"seq"`
}

func TestPostDesiredAccepted(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		name        string
		vmid        int
		body        string
		headers     []string
		publisher   string
		correlation string
	}{
		// The publisher is the token's name, whatever the caller claims.
		{"with correlation", 101, `{"vmid":101,"power":"running","cores":4,"tags":[]}`,
			[]string{"X-Converge-Publisher", "someone-else", "Converge-Publisher", "root", "X-Correlation-Id", "req-42"}, "token:portal", "req-42"},
		{"json with charset", 2000, `{"vmid":2000,"kind":"lxc","absent":true}`, []string{"Content-Type", "application/json; charset=utf-8"}, "token:portal", ""},
		{"description with newlines", 300, "{\"vmid\":300,\"description\":\"a\\nb\\n\"}", nil, "token:portal", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := f.do(t, "POST", fmt.Sprintf("/v1/desired/%d", c.vmid), []byte(c.body), c.headers...)
			if r.code != http.StatusAccepted {
				t.Fatalf("status %d: %s", r.code, r.body)
			}
			var raw map[string]any
			if err := json.Unmarshal(r.body, &raw); err != nil || len(raw) != 3 {
				t.Fatalf("response %s: want exactly vmid, cluster, seq", r.body)
			}
			got := decodeJSON[accepted](t, r)
			if got.VMID != c.vmid || got.Cluster != "pve" || got.Seq == 0 {
				t.Fatalf("response %+v", got)
			}
			m, err := f.stream.GetMsg(f.ctx, got.Seq)
			if err != nil {
				t.Fatalf("event %d not in the stream: %v", got.Seq, err)
			}
			info, err := events.ParseSubject(m.Subject)
			if err != nil || info.Kind != events.KindDesired || info.Cluster != "pve" || info.VMID != c.vmid || info.Partition < 0 {
				t.Fatalf("stored subject %q: %+v %v", m.Subject, info, err)
			}
			if string(m.Data) != c.body {
				t.Errorf("stored body %q, posted %q", m.Data, c.body)
			}
			if m.Header.Get(events.HeaderSchema) != "1" || m.Header.Get(events.HeaderPublisher) != c.publisher ||
				m.Header.Get(events.HeaderCorrelationID) != c.correlation {
				t.Errorf("headers %v, want publisher %q correlation %q", m.Header, c.publisher, c.correlation)
			}
			// The event folds as a valid desired state.
			p := projector.New("pve")
			p.Apply(projector.Event{Seq: m.Sequence, Subject: m.Subject, Header: events.Header(m.Header), Data: m.Data, Time: m.Time})
			if v := p.Views[c.vmid]; v == nil || v.Rejected != nil || v.DesiredSeq != got.Seq || v.Publisher != c.publisher {
				t.Errorf("folded view %+v", v)
			}
		})
	}
}

func TestPostDesiredRejected(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		name   string
		path   string
		body   string
		code   int
		fields []string // problems must name these fields
		says   string
	}{
		{"unknown field", "/v1/desired/101", `{"vmid":101,"cpu":2}`, 400, []string{"cpu"}, "nothing was published"},
		{"vmid mismatch with URL", "/v1/desired/101", `{"vmid":102}`, 400, []string{"vmid"}, "nothing was published"},
		{"bad JSON", "/v1/desired/101", `{"vmid":101,`, 400, []string{""}, "nothing was published"},
		{"empty body", "/v1/desired/101", ``, 400, []string{""}, "nothing was published"},
		{"several problems", "/v1/desired/101", `{"vmid":101,"cores":0,"power":"on","onboot":"yes"}`, 400,
			[]string{"cores", "onboot", "power"}, "nothing was published"},
		{"clone from itself", "/v1/desired/101", `{"vmid":101,"clone":{"from":101}}`, 400, []string{"clone.from"}, "nothing was published"},
		{"vmid not a number", "/v1/desired/abc", `{"vmid":101}`, 400, nil, "vmid must be an integer"},
		{"vmid too small", "/v1/desired/99", `{"vmid":99}`, 400, nil, "vmid must be an integer"},
		{"vmid too large", "/v1/desired/1000000000", `{"vmid":1000000000}`, 400, nil, "vmid must be an integer"},
		{"vmid with leading zero", "/v1/desired/0101", `{"vmid":101}`, 400, nil, "vmid must be an integer"},
		{"vmid with sign", "/v1/desired/+101", `{"vmid":101}`, 400, nil, "vmid must be an integer"},
		{"body too large", "/v1/desired/101", `{"vmid":101,"description":"` + strings.Repeat("x", 1<<20) + `"}`, 413, nil, "too large"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := f.msgs(t)
			r := f.do(t, "POST", c.path, []byte(c.body), "X-Converge-Publisher", "portal")
			if r.code != c.code {
				t.Fatalf("status %d, want %d: %s", r.code, c.code, r.body)
			}
			doc := decodeJSON[struct {
				Error    string              `json:"error"`
				Problems []events.FieldError `json:"problems"`
			}](t, r)
			if !strings.Contains(doc.Error, c.says) {
				t.Errorf("error %q, want it to say %q", doc.Error, c.says)
			}
			var fields []string
			for _, p := range doc.Problems {
				fields = append(fields, p.Field)
				if p.Message == "" {
					t.Errorf("problem without a message: %+v", p)
				}
			}
			if strings.Join(fields, ",") != strings.Join(c.fields, ",") {
				t.Errorf("problem fields %q, want %q (%s)", fields, c.fields, r.body)
			}
			// An HTTP caller names the guest in the URL, not a subject.
			if strings.Contains(string(r.body), "subject") {
				t.Errorf("the answer speaks of a subject: %s", r.body)
			}
			if after := f.msgs(t); after != before {
				t.Fatalf("stream went from %d to %d messages: a rejected request was published", before, after)
			}
		})
	}
	if r := f.do(t, "GET", "/v1/desired/101", nil); r.code != http.StatusMethodNotAllowed {
		t.Errorf("GET /v1/desired/101: %d, want 405", r.code)
	}
}

func (f *fixture) putDoc(t *testing.T, d views.GuestDoc) {
	t.Helper()
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.kv.Put(f.ctx, views.GuestKey(d.View.Cluster, d.View.VMID), b); err != nil {
		t.Fatal(err)
	}
}

type summaryJSON struct {
	VMID     int             `json:"vmid"`
	Cluster  string          `json:"cluster"`
	State    string          `json:"state"`
	Reason   string          `json:"reason"`
	Desired  *events.Desired `json:"desired"`
	Revision uint64          `json:"desired_revision"`
	Observed *struct {
		Exists bool   `json:"exists"`
		Node   string `json:"node"`
		Status string `json:"status"`
	} `json:"observed"`
	Last *struct {
		ID     string `json:"id"`
		Op     string `json:"op"`
		Result string `json:"result"`
		UPID   string `json:"upid"`
		Error  string `json:"error"`
	} `json:"last_action"`
}

func guestDocs() []views.GuestDoc {
	act := &events.Action{ID: "pve-101-5-1", VMID: 101, Cluster: "pve", Op: events.OpStart, Reason: "desired running", DesiredSeq: 5}
	return []views.GuestDoc{
		{View: &projector.View{VMID: 300, Cluster: "pve", Rejected: &projector.Rejection{Seq: 9, Reason: "invalid desired event: cores: must be at least 1, got 0"}},
			Status: planner.Status{Kind: planner.Rejected, Reason: "cores: must be at least 1, got 0"}, UpdatedAt: t0},
		{View: &projector.View{VMID: 101, Cluster: "pve", Desired: &events.Desired{VMID: 101, Power: ptr(events.PowerRunning)}, DesiredSeq: 5,
			Observed:   &events.Observed{VMID: 101, Cluster: "pve", Exists: true, Node: "pve1", Status: "stopped", ReadAt: t0},
			LastAction: act, InFlight: act,
			LastResult: &events.Result{ActionID: act.ID, Status: events.ResultFailed, UPID: "UPID:pve1:1", Error: "VM is locked (backup)"}},
			Status: planner.Status{Kind: planner.Error, Reason: "start failed"}, UpdatedAt: t0},
		{View: &projector.View{VMID: 200, Cluster: "pve", Observed: &events.Observed{VMID: 200, Exists: true, Node: "pve2", Status: "running"}},
			Status: planner.Status{Kind: planner.Unmanaged, Reason: "no desired state"}, UpdatedAt: t0},
	}
}

func TestGuests(t *testing.T) {
	f := newFixture(t)

	r := f.do(t, "GET", "/v1/guests", nil)
	if r.code != http.StatusOK || !strings.Contains(string(r.body), `"guests": []`) {
		t.Fatalf("empty list: %d %s", r.code, r.body)
	}

	for _, d := range guestDocs() {
		f.putDoc(t, d)
	}
	if _, err := f.kv.Put(f.ctx, views.ClusterKey("pve"), []byte(`{"seq":3}`)); err != nil {
		t.Fatal(err)
	}

	r = f.do(t, "GET", "/v1/guests", nil)
	if r.code != http.StatusOK {
		t.Fatalf("list: %d %s", r.code, r.body)
	}
	list := decodeJSON[struct {
		Cluster string        `json:"cluster"`
		Guests  []summaryJSON `json:"guests"`
	}](t, r)
	if list.Cluster != "pve" || len(list.Guests) != 3 {
		t.Fatalf("list %s", r.body)
	}
	if list.Guests[0].VMID != 101 || list.Guests[1].VMID != 200 || list.Guests[2].VMID != 300 {
		t.Fatalf("guests not by vmid: %s", r.body)
	}
	g := list.Guests[0]
	if g.State != "error" || g.Reason != "start failed" || g.Revision != 5 || g.Desired == nil || *g.Desired.Power != events.PowerRunning {
		t.Errorf("guest 101 summary %+v", g)
	}
	if g.Observed == nil || !g.Observed.Exists || g.Observed.Node != "pve1" || g.Observed.Status != "stopped" {
		t.Errorf("guest 101 observed %+v", g.Observed)
	}
	if g.Last == nil || g.Last.ID != "pve-101-5-1" || g.Last.Op != "start" || g.Last.Result != "failed" ||
		g.Last.UPID != "UPID:pve1:1" || g.Last.Error != "VM is locked (backup)" {
		t.Errorf("guest 101 last action %+v", g.Last)
	}
	if u := list.Guests[1]; u.State != "unmanaged" || u.Desired != nil || u.Last != nil || u.Observed == nil {
		t.Errorf("guest 200 summary %+v", u)
	}
	if rj := list.Guests[2]; rj.State != "rejected" || !strings.Contains(rj.Reason, "cores") || rj.Observed != nil {
		t.Errorf("guest 300 summary %+v", rj)
	}

	r = f.do(t, "GET", "/v1/guests/101", nil)
	if r.code != http.StatusOK {
		t.Fatalf("guest 101: %d %s", r.code, r.body)
	}
	one := decodeJSON[summaryJSON](t, r)
	if one.VMID != 101 || one.State != "error" || one.Last == nil || one.Last.Result != "failed" {
		t.Errorf("guest 101 %s", r.body)
	}

	notFound := []struct {
		path string
		code int
		says string
	}{
		{"/v1/guests/555", 404, "converge has no view of guest 555"},
		{"/v1/guests/abc", 400, "vmid must be an integer within 100..999999999"},
		{"/v1/guests/42", 400, "vmid must be an integer within 100..999999999"},
		{"/v1/guests/0101", 400, "vmid must be an integer within 100..999999999"},
	}
	for _, c := range notFound {
		r := f.do(t, "GET", c.path, nil)
		if r.code != c.code {
			t.Errorf("%s: %d, want %d (%s)", c.path, r.code, c.code, r.body)
			continue
		}
		if doc := decodeJSON[map[string]any](t, r); !strings.Contains(fmt.Sprint(doc["error"]), c.says) {
			t.Errorf("%s: %s, want it to say %q", c.path, r.body, c.says)
		}
	}
}

// TestGuestsBucketUnavailable: a reader that cannot reach its bucket is a
// 503 that says so, not an empty list.
func TestGuestsBucketUnavailable(t *testing.T) {
	f := newFixture(t)
	f.putDoc(t, guestDocs()[0])
	if err := f.bus.JS.DeleteKeyValue(f.ctx, f.kv.Bucket()); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/v1/guests", "/v1/guests/300"} {
		r := f.do(t, "GET", path, nil)
		if r.code != http.StatusServiceUnavailable || !strings.Contains(string(r.body), "reading views") {
			t.Errorf("%s with the bucket gone: %d %s", path, r.code, r.body)
		}
	}
}
