package api_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
	"github.com/converge-pve/converge/projector"
)

type planJSON struct {
	Changes      bool   `json:"changes"`
	Actions      int    `json:"actions"`
	PolicySource string `json:"policy_source"`
	LimitsSource string `json:"limits_source"`
	Guests       []struct {
		VMID     int    `json:"vmid"`
		Desired  string `json:"desired"`
		Rejected []struct {
			Field string `json:"field"`
		} `json:"rejected"`
		Status struct {
			State string `json:"state"`
		} `json:"status"`
		Steps []struct {
			Op  string            `json:"op"`
			Set map[string]string `json:"set"`
		} `json:"steps"`
	} `json:"guests"`
}

// POST /v1/plan plans a file's body against the views with a read token,
// publishes nothing, names rejected entries, and answers 503 while no
// planner has written views.
func TestPostPlan(t *testing.T) {
	f := newFixture(t)
	body := []byte(`{"guests":[{"vmid":101,"cores":4},{"vmid":102,"cores":0}]}`)
	if r := f.do(t, "POST", "/v1/plan", body, "Authorization", "Bearer "+viewerToken); r.code != http.StatusServiceUnavailable {
		t.Fatalf("no views: %d %s, want 503", r.code, r.body)
	}
	pol, lim := planner.DefaultPolicy(), planner.DefaultLimits()
	cd := views.ClusterDoc{State: projector.ClusterState{Cluster: "pve", HeartbeatAt: time.Now(), Reachable: true}, Seq: 10,
		Planner: "planner@test", Policy: &pol, Limits: &lim}
	raw, _ := json.Marshal(cd)
	if _, err := f.kv.Put(f.ctx, views.ClusterKey("pve"), raw); err != nil {
		t.Fatal(err)
	}
	f.putDoc(t, views.GuestDoc{View: &projector.View{VMID: 101, Cluster: "pve", ObservedSeq: 3,
		Observed: &events.Observed{VMID: 101, Cluster: "pve", Exists: true, Node: "pve1", Kind: events.QEMU, Status: "stopped",
			ReadAt: t0, Config: events.GuestConfig{Cores: 1, MemoryMiB: 512}}}, Status: planner.Status{Kind: planner.Unmanaged}})
	before := f.msgs(t)

	r := f.do(t, "POST", "/v1/plan", body, "Authorization", "Bearer "+viewerToken)
	if r.code != http.StatusOK {
		t.Fatalf("POST /v1/plan with a read token: %d %s", r.code, r.body)
	}
	p := decodeJSON[planJSON](t, r)
	if len(p.Guests) != 2 || p.Guests[0].VMID != 101 || p.Guests[0].Desired != "new" || !p.Changes {
		t.Fatalf("plan: %s", r.body)
	}
	if g := p.Guests[0]; len(g.Steps) != 1 || g.Steps[0].Op != "set_config" || g.Steps[0].Set["cores"] != "4" || p.Actions != 1 {
		t.Errorf("101 should get set_config cores=4: %s", r.body)
	}
	if g := p.Guests[1]; g.Desired != "rejected" || len(g.Rejected) == 0 || g.Rejected[0].Field != "cores" {
		t.Errorf("102 should be rejected naming cores: %s", r.body)
	}
	if p.PolicySource != "published by planner planner@test" || p.LimitsSource != "published by planner planner@test" {
		t.Errorf("sources: %q %q", p.PolicySource, p.LimitsSource)
	}
	if after := f.msgs(t); after != before {
		t.Errorf("POST /v1/plan published %d messages", after-before)
	}
	if r := f.do(t, "POST", "/v1/plan", body, "Content-Type", "text/plain"); r.code != http.StatusUnsupportedMediaType {
		t.Errorf("text/plain: %d, want 415", r.code)
	}
	if r := f.do(t, "POST", "/v1/plan", []byte(`7`)); r.code != http.StatusBadRequest {
		t.Errorf("a number: %d, want 400", r.code)
	}
	if r := f.do(t, "POST", "/v1/plan", body, "Authorization", ""); r.code != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", r.code)
	}
}
