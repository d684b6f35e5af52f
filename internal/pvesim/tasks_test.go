package pvesim_test

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/pvesim"
)

// TestNodeTaskListFilters: GET /nodes/{node}/tasks filters as Proxmox does:
// vmid, exact typefilter, since/until on the start second (inclusive),
// source archive (default, finished tasks), active (running, status
// "RUNNING") and all (active first), then start/limit.
func TestNodeTaskListFilters(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	for _, id := range []int{100, 101} {
		if err := s.AddGuest(pvesim.GuestSpec{VMID: id}); err != nil {
			t.Fatal(err)
		}
	}
	post := func(path string) string {
		t.Helper()
		res, body := raw(t, "POST", s.URL()+"/nodes/pve1/qemu/"+path, tokenHdr(), "")
		upid, _ := body["data"].(string)
		if res.StatusCode != 200 || upid == "" {
			t.Fatalf("POST %s: %s %v", path, res.Status, body)
		}
		return upid
	}
	start100 := post("100/status/start")
	stop100 := post("100/status/stop")
	start101 := post("101/status/start")
	if err := s.UpdateFaults(func(f *pvesim.Faults) { f.TaskLatency = pvesim.Duration(time.Hour) }); err != nil {
		t.Fatal(err)
	}
	stop101 := post("101/status/stop") // stays running
	t.Cleanup(func() { s.CompleteRunningTasks() })

	var startSec int64
	for _, ti := range s.Tasks() {
		if ti.UPID == start100 {
			startSec = ti.Start.Unix()
		}
	}
	list := func(query string) ([]string, []map[string]any) {
		t.Helper()
		res, body := raw(t, "GET", s.URL()+"/nodes/pve1/tasks?"+query, tokenHdr(), "")
		items, _ := body["data"].([]any)
		if res.StatusCode != 200 {
			t.Fatalf("GET tasks?%s: %s %v", query, res.Status, body)
		}
		var upids []string
		var entries []map[string]any
		for _, it := range items {
			m := it.(map[string]any)
			upids = append(upids, m["upid"].(string))
			entries = append(entries, m)
		}
		return upids, entries
	}
	sec := func(d int64) string { return strconv.FormatInt(startSec+d, 10) }
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"vmid=100", []string{stop100, start100}},
		{"vmid=101", []string{start101}}, // archive: the running stop is not listed
		{"vmid=100&typefilter=qmstart", []string{start100}},
		{"vmid=100&typefilter=qmsta", nil}, // exact type, not a prefix
		{"source=active", []string{stop101}},
		{"source=all&vmid=101", []string{stop101, start101}},
		{"source=all", []string{stop101, start101, stop100, start100}},
		{"source=all&start=1&limit=2", []string{start101, stop100}},
		{"vmid=100&typefilter=qmstart&since=" + sec(0), []string{start100}},
		{"vmid=100&typefilter=qmstart&since=" + sec(1), nil},
		{"vmid=100&typefilter=qmstart&until=" + sec(0), []string{start100}},
		{"vmid=100&typefilter=qmstart&until=" + sec(-1), nil},
		{"source=all&vmid=101&since=" + sec(0) + "&until=" + sec(3600), []string{stop101, start101}},
	} {
		got, _ := list(tc.query)
		if !slices.Equal(got, tc.want) {
			t.Errorf("tasks?%s:\n got %v\nwant %v", tc.query, got, tc.want)
		}
	}

	_, entries := list("source=all&vmid=101")
	if entries[0]["status"] != "RUNNING" || entries[0]["endtime"] != nil || entries[1]["status"] != "OK" {
		t.Fatalf("running tasks list with status RUNNING, finished ones with their end status: %v", entries)
	}

	for query, field := range map[string]string{
		"since=yesterday": "since",
		"until=1.5":       "until",
		"source=recent":   "source",
	} {
		res, body := raw(t, "GET", s.URL()+"/nodes/pve1/tasks?"+query, tokenHdr(), "")
		errs, _ := body["errors"].(map[string]any)
		if res.StatusCode != 400 || errs[field] == nil {
			t.Errorf("tasks?%s: %s %v, want 400 with an error for %s", query, res.Status, body, field)
		}
	}
}
