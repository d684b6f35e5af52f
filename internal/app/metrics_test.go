package app_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/app"
	"github.com/converge-pve/converge/internal/clock/clocktest"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/natsserver"
	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/internal/pvesim/pvesimtest"
	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
)

// Every metric of docs/metrics.md moves in one run of every role (as
// `converge up` runs them) against the simulator, read from /metrics over
// HTTP: actions that succeed and one that fails, a guest that converges,
// a rejected desired event, a shutdown the mass-change guard holds, and
// Proxmox unreachable for an observer pass.
func TestMetricsOverHTTP(t *testing.T) {
	sim := pvesimtest.Start(t, pvesim.Options{Nodes: 1, Guests: 16})
	ctx, cancel := context.WithCancel(context.Background())
	cfg := app.DefaultConfig()
	cfg.Roles, cfg.Embedded = app.All, &natsserver.Options{DataDir: t.TempDir(), Listen: "127.0.0.1:-1"}
	cfg.Proxmox, cfg.HTTP, cfg.Logger = pvesimtest.Client(t, sim), "127.0.0.1:0", zerolog.Nop()
	cfg.Ready.Clock = clocktest.New(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	// One pass at start; the test runs the others itself.
	cfg.Observer.Interval = time.Hour
	cfg.Planner.Planner.Policy.ObserverTimeout = 2 * time.Hour
	// One shutdown per window; the next is held.
	l := &cfg.Planner.Planner.Limits
	l.GuardMin, l.GuardShare, l.GuardWindow = 1, 0.001, time.Hour
	a, err := app.Start(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = a.Wait() })
	waitReady(t, a)
	tctx := pvesimtest.Context(t)
	vs, err := a.Bus().ViewStore()
	if err != nil {
		t.Fatal(err)
	}
	rd := views.Reader{Store: vs, Cluster: events.DefaultCluster}

	inv, err := pvesimtest.Client(t, sim).Inventory(tctx)
	if err != nil {
		t.Fatal(err)
	}
	var running []int
	for _, r := range inv {
		if r.Kind == pve.KindQEMU && !r.Template && r.Status == "running" {
			running = append(running, r.VMID)
		}
	}
	if len(running) < 4 {
		t.Fatalf("the simulator runs %d VMs; the test needs 4", len(running))
	}
	desire := func(vmid int, body string) uint64 {
		t.Helper()
		m, err := events.DesiredMessage(&events.Desired{VMID: vmid}, events.PublishOptions{Publisher: "test"})
		if err != nil {
			t.Fatal(err)
		}
		m.Data = []byte(body) // raw: a rejected one must reach the journal too
		ack, err := a.Bus().Append(tctx, m, journal.Expect{})
		if err != nil {
			t.Fatal(err)
		}
		return ack.Seq
	}
	scrape := func() map[string]*dto.MetricFamily { return scrapeMetrics(t, "http://"+a.HTTPAddr()+"/metrics") }
	waitMetric := func(what string, cond func(map[string]*dto.MetricFamily) bool) {
		t.Helper()
		if !until(30*time.Second, func() bool { return cond(scrape()) }) {
			t.Fatalf("metrics never showed %s", what)
		}
	}

	// A config write succeeds and the guest converges.
	seq := desire(running[0], `{"vmid":`+strconv.Itoa(running[0])+`,"power":"running","description":"metrics one"}`)
	if doc := waitDoc(t, rd, running[0], seq, planner.Converged); doc.Status.Kind != planner.Converged {
		t.Fatalf("guest %d: %s (%s)", running[0], doc.Status.Kind, doc.Status.Reason)
	}
	waitMetric("a convergence", func(m map[string]*dto.MetricFamily) bool {
		return histCount(m, "converge_convergence_seconds", nil) >= 1
	})

	// One fails: Proxmox refuses every write meanwhile.
	if err := sim.SetFaults(pvesim.Faults{FailRate: 1, FailMessage: "update failed: metrics test"}); err != nil {
		t.Fatal(err)
	}
	desire(running[1], `{"vmid":`+strconv.Itoa(running[1])+`,"power":"running","description":"metrics two"}`)
	waitMetric("a failed action", func(m map[string]*dto.MetricFamily) bool {
		return sumWhere(m, "converge_actions_total", map[string]string{"op": "set_config", "result": "failed"}) >= 1
	})
	if err := sim.SetFaults(pvesim.Faults{}); err != nil {
		t.Fatal(err)
	}

	// Two shutdowns within the guard's window: the second is held.
	desire(running[2], `{"vmid":`+strconv.Itoa(running[2])+`,"power":"stopped"}`)
	desire(running[3], `{"vmid":`+strconv.Itoa(running[3])+`,"power":"stopped"}`)
	waitMetric("a held action", func(m map[string]*dto.MetricFamily) bool {
		return value(m, "converge_held_actions", nil) >= 1
	})

	// A desired event that does not validate.
	desire(running[0], `{"vmid":`+strconv.Itoa(running[0])+`,"cores":"many"}`)
	waitMetric("a rejected desired event", func(m map[string]*dto.MetricFamily) bool {
		return value(m, "converge_rejected_events_total", nil) >= 1
	})

	// Proxmox unreachable for a pass: the observer says so.
	sim.SetUnreachable(time.Hour)
	if _, err := a.Observer().Pass(tctx); err == nil {
		t.Fatal("a pass against an unreachable Proxmox succeeded")
	}
	m := scrape()
	if v := value(m, "converge_pve_reachable", map[string]string{"role": "observer"}); v != 0 {
		t.Errorf("converge_pve_reachable{role=observer} = %v while Proxmox is unreachable", v)
	}
	if v := sumWhere(m, "converge_pve_requests_total", map[string]string{"method": "GET", "class": "transient"}); v < 1 {
		t.Errorf("no transient GET counted while Proxmox is unreachable: %v", v)
	}
	waitMetric("the guests blocked by the outage", func(m map[string]*dto.MetricFamily) bool {
		return value(m, "converge_guests", map[string]string{"state": string(planner.Blocked)}) >= 1
	})
	sim.SetUnreachable(0)
	if _, err := a.Observer().Pass(tctx); err != nil {
		t.Fatal(err)
	}
	// The failed pass's heartbeat blocked every guest; the gauges move back
	// only once the planner has folded this pass and flushed, which the
	// pass's return does not wait for.
	waitMetric("the guests unblocked after the outage", func(m map[string]*dto.MetricFamily) bool {
		return value(m, "converge_guests", map[string]string{"state": string(planner.Blocked)}) == 0 &&
			value(m, "converge_guests", map[string]string{"state": string(planner.Converged)}) >= 1
	})
	m = scrape()

	for _, c := range []struct {
		name   string
		labels map[string]string
		min    float64
	}{
		{"converge_actions_total", map[string]string{"op": "set_config", "result": "succeeded"}, 1},
		{"converge_actions_total", map[string]string{"op": "shutdown", "result": "succeeded"}, 1},
		{"converge_pve_requests_total", map[string]string{"method": "GET", "class": "ok"}, 1},
		{"converge_pve_requests_total", map[string]string{"method": "POST", "class": "ok"}, 1},
		{"converge_pve_reachable", map[string]string{"role": "observer"}, 1},
		{"converge_pve_reachable", map[string]string{"role": "executor"}, 1},
		{"converge_observer_last_pass_timestamp_seconds", nil, 1},
		{"converge_guests", map[string]string{"state": "converged"}, 1},
		{"converge_guests", map[string]string{"state": "held"}, 1},
		{"converge_guests_out_of_sync", nil, 1},
		{"converge_held_actions", nil, 1},
		{"converge_rejected_events_total", nil, 1},
		{"converge_partitions_owned", map[string]string{"role": "planner"}, 1},
		{"converge_partitions_owned", map[string]string{"role": "executor"}, 1},
		{"go_goroutines", nil, 1},
		{"process_start_time_seconds", nil, 1},
	} {
		if v := sumWhere(m, c.name, c.labels); v < c.min {
			t.Errorf("%s%v = %v, want at least %v", c.name, c.labels, v, c.min)
		}
	}
	for _, h := range []struct {
		name   string
		labels map[string]string
	}{
		{"converge_action_duration_seconds", map[string]string{"op": "set_config"}},
		{"converge_convergence_seconds", nil},
		{"converge_pve_request_duration_seconds", map[string]string{"method": "GET"}},
	} {
		if n := histCount(m, h.name, h.labels); n < 1 {
			t.Errorf("%s%v: %d observations, want at least 1", h.name, h.labels, n)
		}
	}
	// Each owned partition's consumer is listed, by name.
	var consumers int
	for _, s := range m["converge_consumer_pending"].GetMetric() {
		if name := label(s, "consumer"); strings.HasPrefix(name, "executor-pve-p") {
			consumers++
		}
	}
	if consumers == 0 {
		t.Errorf("no converge_consumer_pending{consumer=executor-pve-pNN}: %v", m["converge_consumer_pending"])
	}
	if v := value(m, "converge_consumer_pending", map[string]string{"consumer": "planner"}); v < 0 {
		t.Error("no converge_consumer_pending{consumer=planner}")
	}
}

// scrapeMetrics reads url's Prometheus text exposition.
func scrapeMetrics(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	req, err := http.NewRequestWithContext(pvesimtest.Context(t), "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, res.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return mfs
}

// matches reports whether a series carries every label of want.
func matches(s *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		if label(s, k) != v {
			return false
		}
	}
	return true
}

func label(s *dto.Metric, name string) string {
	for _, lp := range s.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}

// sumWhere sums the counters or gauges of name whose labels include want.
func sumWhere(m map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	var sum float64
	for _, s := range m[name].GetMetric() {
		if matches(s, want) {
			sum += s.GetCounter().GetValue() + s.GetGauge().GetValue() + s.GetUntyped().GetValue()
		}
	}
	return sum
}

// value is sumWhere, -1 when no series matches (absent is not zero).
func value(m map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	for _, s := range m[name].GetMetric() {
		if matches(s, want) {
			return sumWhere(m, name, want)
		}
	}
	return -1
}

// histCount sums the observations of the histograms of name whose labels
// include want.
func histCount(m map[string]*dto.MetricFamily, name string, want map[string]string) uint64 {
	var n uint64
	for _, s := range m[name].GetMetric() {
		if matches(s, want) {
			n += s.GetHistogram().GetSampleCount()
		}
	}
	return n
}

// waitDoc waits until the guest's document, written at or after seq, is
// in state, or 30 s pass; it returns the last document read.
func waitDoc(t *testing.T, rd views.Reader, vmid int, seq uint64, state planner.StatusKind) *views.GuestDoc {
	t.Helper()
	doc := &views.GuestDoc{}
	until(30*time.Second, func() bool {
		d, err := rd.Guest(pvesimtest.Context(t), vmid)
		if err == nil && d != nil {
			doc = d
		}
		return doc.View != nil && doc.View.Seq >= seq && doc.Status.Kind == state
	})
	return doc
}
