package pvesim_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/pvesim"
)

// waitWorkers polls the node's pool stats until ok holds (a condition, not
// a sleep: the calls it waits for are in flight in other goroutines).
func waitWorkers(t *testing.T, s *pvesim.Sim, node string, ok func(d, p pvesim.PoolStats) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, st := range s.APIWorkerStats() {
			if st.Node == node && ok(st.PVEDaemon, st.PVEProxy) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: workers never reached the state: %+v", node, s.APIWorkerStats())
		}
		time.Sleep(time.Millisecond)
	}
}

// call sends one authenticated request and returns its status line.
func call(ctx context.Context, method, url, body string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "PVEAPIToken="+tokenID+"="+tokenSecret)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := httpClient().Do(req)
	if err != nil {
		return "", err
	}
	res.Body.Close()
	return res.Status, nil
}

func qemuOn(s *pvesim.Sim, node string) []int {
	var ids []int
	for _, g := range s.Guests() {
		if g.Node == node && g.Kind == pvesim.QEMU && !g.Template {
			ids = append(ids, g.VMID)
		}
	}
	return ids
}

// TestAPIWorkersQueue pins pvedaemon's 3 workers per node
// (pve-manager PVE/Service/pvedaemon.pm max_workers => 3): a protected
// call (PVE::HTTPServer::rest_handler hands $info->{protected} handlers
// to pvedaemon) waits while the node's three workers run synchronous
// config updates (qemu-server update_vm: the qmconfig worker inside the
// call), and gets the first worker let go. A call pveproxy serves itself
// (GET …/config is not protected), another node's pvedaemon and the entry
// node's pveproxy (/cluster/resources) do not wait.
func TestAPIWorkersQueue(t *testing.T) {
	s := startSim(t, pvesim.Options{Nodes: 2, Guests: 24, Faults: pvesim.Faults{
		TaskLatencyByType: map[string]pvesim.Duration{"qmconfig": pvesim.Duration(time.Hour)},
	}})
	on1, on2 := qemuOn(s, "pve1"), qemuOn(s, "pve2")
	if len(on1) < 4 || len(on2) < 1 {
		t.Fatalf("demo guests: pve1 %v, pve2 %v", on1, on2)
	}
	u := s.URL() + "/nodes/"
	var cancels []context.CancelFunc
	defer func() {
		for _, c := range cancels {
			c()
		}
	}()
	for _, id := range on1[:3] {
		ctx, cancel := context.WithCancel(ctxT(t))
		cancels = append(cancels, cancel)
		go func() { _, _ = call(ctx, "PUT", fmt.Sprintf("%spve1/qemu/%d/config", u, id), "cores=2") }()
	}
	waitWorkers(t, s, "pve1", func(d, _ pvesim.PoolStats) bool { return d.Busy == 3 })
	fourth := make(chan string, 1)
	go func() {
		st, err := call(ctxT(t), "GET", fmt.Sprintf("%spve1/qemu/%d/status/current", u, on1[3]), "")
		if err != nil {
			st = err.Error()
		}
		fourth <- st
	}()
	waitWorkers(t, s, "pve1", func(d, _ pvesim.PoolStats) bool { return d.Queued == 1 })
	for _, path := range []string{
		fmt.Sprintf("%spve1/qemu/%d/config", u, on1[3]),
		fmt.Sprintf("%spve2/qemu/%d/status/current", u, on2[0]),
		s.URL() + "/cluster/resources",
	} {
		if st, err := call(ctxT(t), "GET", path, ""); err != nil || st != "200 OK" {
			t.Fatalf("GET %s while pve1's pvedaemon is busy: %q %v", path, st, err)
		}
	}
	select {
	case st := <-fourth:
		t.Fatalf("the fourth protected call was served by a busy pvedaemon: %s", st)
	default:
	}
	cancels[0]() // its client goes; the handler returns and lets its worker go
	if st := <-fourth; st != "200 OK" {
		t.Fatalf("queued call: %s", st)
	}
	for _, st := range s.APIWorkerStats() {
		if st.Node == "pve1" && (st.PVEDaemon.Waited != 1 || st.PVEDaemon.MaxWait <= 0 || st.PVEDaemon.Workers != 3) {
			t.Fatalf("pve1 pvedaemon stats: %+v", st.PVEDaemon)
		}
		if st.PVEProxy.Waited != 0 {
			t.Fatalf("%s pveproxy waited: %+v", st.Node, st.PVEProxy)
		}
	}
}

// TestAPIWorkersTaskReleases pins that a task-starting call holds its
// worker only until fork_worker has returned the UPID
// (PVE::RESTEnvironment::fork_worker): with one pvedaemon worker, an hour-
// long start leaves it free for the next call.
func TestAPIWorkersTaskReleases(t *testing.T) {
	s := startSim(t, pvesim.Options{Guests: 6, APIWorkers: 1, Faults: pvesim.Faults{
		TaskLatencyByType: map[string]pvesim.Duration{"qmstart": pvesim.Duration(time.Hour)},
	}})
	var stopped int
	for _, g := range s.Guests() {
		if g.Kind == pvesim.QEMU && !g.Template && g.Status == "stopped" {
			stopped = g.VMID
		}
	}
	u := fmt.Sprintf("%s/nodes/pve1/qemu/%d/status/", s.URL(), stopped)
	if st, err := call(ctxT(t), "POST", u+"start", ""); err != nil || st != "200 OK" {
		t.Fatalf("start: %q %v", st, err)
	}
	if st, err := call(ctxT(t), "GET", u+"current", ""); err != nil || st != "200 OK" {
		t.Fatalf("status while the start task runs: %q %v", st, err)
	}
	if st := s.APIWorkerStats()[0].PVEDaemon; st.Waited != 0 || st.Busy != 0 || st.Calls != 2 {
		t.Fatalf("pvedaemon: %+v", st)
	}
}

// TestAPIWorkersUnlimited: a negative count leaves calls unlimited, for
// tests that need more than Proxmox serves at once.
func TestAPIWorkersUnlimited(t *testing.T) {
	s := startSim(t, pvesim.Options{Guests: 12, APIWorkers: -1, Faults: pvesim.Faults{
		TaskLatencyByType: map[string]pvesim.Duration{"qmconfig": pvesim.Duration(time.Hour)},
	}})
	ids := qemuOn(s, "pve1")
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	for _, id := range ids[:4] {
		go func() { _, _ = call(ctx, "PUT", fmt.Sprintf("%s/nodes/pve1/qemu/%d/config", s.URL(), id), "cores=2") }()
	}
	waitWorkers(t, s, "pve1", func(d, _ pvesim.PoolStats) bool { return d.Calls == 4 })
	if st, err := call(ctxT(t), "GET", fmt.Sprintf("%s/nodes/pve1/qemu/%d/status/current", s.URL(), ids[4]), ""); err != nil || st != "200 OK" {
		t.Fatalf("status: %q %v", st, err)
	}
	if st := s.APIWorkerStats()[0].PVEDaemon; st.Workers != 0 || st.Waited != 0 {
		t.Fatalf("pvedaemon: %+v", st)
	}
}
