package deploy_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// The metrics converge exports (the names of issue 22), and which of them are
// histograms (queried as _bucket, _sum, _count).
var (
	convergeMetrics = map[string]bool{
		"converge_actions_total": false, "converge_action_duration_seconds": true,
		"converge_convergence_seconds": true, "converge_guests": false, "converge_guests_out_of_sync": false,
		"converge_pve_requests_total": false, "converge_pve_request_duration_seconds": true,
		"converge_pve_reachable": false, "converge_observer_last_pass_timestamp_seconds": false,
		"converge_consumer_pending": false, "converge_partitions_owned": false, "converge_held_actions": false,
		"converge_rejected_events_total": false,
	}
	metricName = regexp.MustCompile(`\b((?:converge|go|process)_[a-z0-9_]+)`)
)

// TestGrafanaDashboard checks grafana/converge.json: it parses, queries a
// Prometheus data source chosen by a variable, uses only metrics converge
// exports and every one of them.
func TestGrafanaDashboard(t *testing.T) {
	b, err := os.ReadFile("grafana/converge.json")
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("converge.json: %v", err)
	}
	hasVar := false
	for _, v := range d["templating"].(map[string]any)["list"].([]any) {
		v := v.(map[string]any)
		if v["type"] == "datasource" && v["query"] == "prometheus" && v["name"] == "datasource" {
			hasVar = true
		}
	}
	if !hasVar {
		t.Error("no Prometheus data source variable $datasource")
	}
	used := map[string]bool{}
	exprs := 0
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ds, ok := v["datasource"].(map[string]any); ok && ds["uid"] != "${datasource}" {
				t.Errorf("data source %v, want ${datasource}", ds)
			}
			if e, ok := v["expr"].(string); ok {
				exprs++
				for _, m := range metricName.FindAllString(e, -1) {
					if strings.HasPrefix(m, "go_") || strings.HasPrefix(m, "process_") {
						continue
					}
					base := m
					for _, suf := range []string{"_bucket", "_sum", "_count"} {
						if b, ok := strings.CutSuffix(m, suf); ok && convergeMetrics[b] {
							base = b
						}
					}
					if _, ok := convergeMetrics[base]; !ok || (base == m && convergeMetrics[m]) {
						t.Errorf("expression %q: %s is not a metric converge exports", e, m)
					}
					used[base] = true
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(d["panels"])
	if exprs == 0 {
		t.Fatal("no expressions")
	}
	for m := range convergeMetrics {
		if !used[m] {
			t.Errorf("no panel shows %s", m)
		}
	}
}
