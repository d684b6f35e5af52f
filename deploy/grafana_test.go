package deploy_test

import (
	"encoding/json"
	"fmt"
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

// documentedMetric is a row of docs/metrics.md's table: its type and, per
// label, the values the table lists (none: any value).
type documentedMetric struct {
	histogram bool
	labels    map[string][]*regexp.Regexp
}

var (
	backticked = regexp.MustCompile("`([^`]+)`")
	// A value's placeholders: <cluster> any text, NN a number.
	valuePlaceholder = regexp.MustCompile(`<[^>]+>|NN`)
	// A selector's label matchers, and the labels of by (…) / without (…).
	selector = regexp.MustCompile(`\b([a-z_:][a-z0-9_:]*)\{([^}]*)\}`)
	matcher  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"`)
	grouping = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
)

// targetLabels are the labels Prometheus adds to every series it scrapes.
var targetLabels = map[string]bool{"instance": true, "job": true}

// documentedMetrics parses the table of docs/metrics.md: name, type and
// labels, each label followed by its values in parentheses, e.g.
// "`op`, `result` (`succeeded`, `failed`, `skipped`), `class` (error class)".
func documentedMetrics(t *testing.T) map[string]documentedMetric {
	t.Helper()
	b, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]documentedMetric{}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			t.Fatalf("docs/metrics.md: short row %q", line)
		}
		name := strings.Trim(strings.TrimSpace(cells[1]), "`")
		m := documentedMetric{histogram: strings.TrimSpace(cells[2]) == "histogram", labels: map[string][]*regexp.Regexp{}}
		cell := cells[3]
		last := ""
		for i := 0; i < len(cell); i++ {
			switch cell[i] {
			case '`': // a label name, outside parentheses
				end := strings.IndexByte(cell[i+1:], '`')
				if end < 0 {
					t.Fatalf("docs/metrics.md %s: unbalanced ` in %q", name, cell)
				}
				last = cell[i+1 : i+1+end]
				m.labels[last] = nil
				i += end + 1
			case '(': // the values of the label before it, up to the matching ')'
				depth, j := 0, i
				for ; j < len(cell); j++ {
					if cell[j] == '(' {
						depth++
					} else if cell[j] == ')' {
						if depth--; depth == 0 {
							break
						}
					}
				}
				if last == "" || j == len(cell) {
					t.Fatalf("docs/metrics.md %s: parentheses not after a label, or unbalanced, in %q", name, cell)
				}
				for _, v := range backticked.FindAllStringSubmatch(cell[i:j], -1) {
					pattern := valuePlaceholder.ReplaceAllStringFunc(regexp.QuoteMeta(v[1]), func(p string) string {
						if p == "NN" {
							return "[0-9]+"
						}
						return ".+"
					})
					m.labels[last] = append(m.labels[last], regexp.MustCompile("^(?:"+pattern+")$"))
				}
				i = j
			}
		}
		out[name] = m
	}
	return out
}

// example is a value a documented value pattern stands for (a
// placeholder filled in), for testing a panel's regular expression on.
func example(v *regexp.Regexp) string {
	s := strings.TrimSuffix(strings.TrimPrefix(v.String(), "^(?:"), ")$")
	s = strings.NewReplacer("[0-9]+", "00", ".+", "x").Replace(s)
	return strings.ReplaceAll(s, `\`, "")
}

// labelProblems lists what in expr matches on a label, or a label value,
// that docs does not document for the metric: such a filter matches
// nothing (or everything, negated), and the panel shows nonsense.
func labelProblems(expr string, docs map[string]documentedMetric) []string {
	var problems []string
	labels := map[string]bool{"le": true}
	for l := range targetLabels {
		labels[l] = true
	}
	for _, name := range metricName.FindAllString(expr, -1) {
		base := name
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suf); ok && docs[b].histogram {
				base = b
			}
		}
		for l := range docs[base].labels {
			labels[l] = true
		}
	}
	for _, g := range grouping.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(g[1], ",") {
			if l = strings.TrimSpace(l); l != "" && !labels[l] {
				problems = append(problems, "groups by "+l+", a label none of its metrics has")
			}
		}
	}
	for _, sel := range selector.FindAllStringSubmatch(expr, -1) {
		name := sel[1]
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			continue
		}
		base := name
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suf); ok && docs[b].histogram {
				base = b
			}
		}
		doc, ok := docs[base]
		if !ok {
			problems = append(problems, name+" is not in docs/metrics.md's table")
			continue
		}
		for _, m := range matcher.FindAllStringSubmatch(sel[2], -1) {
			label, op, value := m[1], m[2], m[3]
			values, known := doc.labels[label]
			switch {
			case targetLabels[label] || (label == "le" && name == base+"_bucket") || strings.Contains(value, "$"):
				continue // any value; a Grafana variable is chosen at view time
			case !known:
				problems = append(problems, fmt.Sprintf("%s has no label %s", base, label))
				continue
			case len(values) == 0:
				continue // documented without a list of values
			}
			found := false
			if op == "=" || op == "!=" {
				for _, v := range values {
					found = found || v.MatchString(value)
				}
			} else if re, err := regexp.Compile("^(?:" + value + ")$"); err != nil {
				problems = append(problems, fmt.Sprintf("%s%s%q: %v", label, op, value, err))
				continue
			} else {
				for _, v := range values {
					found = found || re.MatchString(example(v))
				}
			}
			if !found {
				problems = append(problems, fmt.Sprintf("%s{%s%s%q}: no value docs/metrics.md documents for %s matches", base, label, op, value, label))
			}
		}
	}
	return problems
}

// TestGrafanaLabelValues checks every label a panel matches on, and every
// value it matches, against docs/metrics.md: the "Proxmox errors" panel
// once filtered class!~"2.*" on a label whose values are ok and the error
// classes, and showed 100 % errors at all times.
func TestGrafanaLabelValues(t *testing.T) {
	docs := documentedMetrics(t)
	for m := range convergeMetrics {
		if _, ok := docs[m]; !ok {
			t.Errorf("docs/metrics.md's table has no row for %s", m)
		}
	}
	if v := docs["converge_pve_requests_total"].labels["class"]; len(v) < 2 || !v[0].MatchString("ok") {
		t.Fatalf("docs/metrics.md: class values of converge_pve_requests_total not parsed: %v", v)
	}
	// The check itself: what it must refuse and what it must let by.
	for expr, bad := range map[string]bool{
		`sum(rate(converge_pve_requests_total{class!~"2.*"}[5m]))`:                       true,
		`converge_guests{state="running"}`:                                               true,
		`converge_actions_total{result="ok"}`:                                            true,
		`converge_pve_reachable{role="planner"}`:                                         true,
		`converge_pve_requests_total{code="500"}`:                                        true,
		`sum by (node) (converge_guests)`:                                                true,
		`converge_planner_made_up{x="y"}`:                                                true,
		`sum(rate(converge_pve_requests_total{class!="ok"}[5m]))`:                        false,
		`converge_pve_requests_total{class=~"transient|locked"}`:                         false,
		`converge_consumer_pending{consumer="executor-pve-p03"}`:                         false,
		`converge_consumer_pending{consumer=~"executor-.*"}`:                             false,
		`sum by (le, op) (rate(converge_action_duration_seconds_bucket{le="+Inf"}[5m]))`: false,
		`converge_guests{state="error", instance=~"$instance"}`:                          false,
	} {
		if got := labelProblems(expr, docs); (len(got) > 0) != bad {
			t.Errorf("labelProblems(%s) = %q, want problems: %v", expr, got, bad)
		}
	}
	b, err := os.ReadFile("grafana/converge.json")
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("converge.json: %v", err)
	}
	var walk func(title string, v any)
	walk = func(title string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if s, ok := v["title"].(string); ok {
				title = s
			}
			if e, ok := v["expr"].(string); ok {
				for _, p := range labelProblems(e, docs) {
					t.Errorf("panel %q, %s: %s", title, e, p)
				}
			}
			for _, x := range v {
				walk(title, x)
			}
		case []any:
			for _, x := range v {
				walk(title, x)
			}
		}
	}
	walk("", d["panels"])
}
