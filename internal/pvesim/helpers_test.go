package pvesim_test

import (
	"context"
	"crypto/tls"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	proxmox "github.com/luthermonson/go-proxmox"

	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/internal/pvesim/pvesimtest"
)

const (
	tokenID     = pvesimtest.TokenID
	tokenSecret = pvesimtest.TokenSecret
	password    = pvesimtest.Password
)

var (
	startSim = pvesimtest.Start   // a simulator on a loopback port for the test's lifetime
	ctxT     = pvesimtest.Context // a context bound to the test
)

// httpClient is an HTTP/1.1 client that trusts the simulator's certificate.
func httpClient() *http.Client {
	return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // test-only: self-signed simulator cert
	}}
}

func tokenClient(s *pvesim.Sim) *proxmox.Client {
	return proxmox.NewClient(s.URL(), proxmox.WithHTTPClient(httpClient()), proxmox.WithAPIToken(tokenID, tokenSecret))
}

// waitTask waits for a task to end through the simulator (no polling, no
// sleeps), then reads its final status through go-proxmox over HTTP.
func waitTask(t *testing.T, s *pvesim.Sim, task *proxmox.Task) *proxmox.Task {
	t.Helper()
	if task == nil {
		t.Fatal("nil task")
	}
	ctx := ctxT(t)
	if _, err := s.WaitTask(ctx, string(task.UPID)); err != nil {
		t.Fatalf("wait %s: %v", task.UPID, err)
	}
	if err := task.Ping(ctx); err != nil {
		t.Fatalf("ping %s: %v", task.UPID, err)
	}
	if !task.IsCompleted {
		t.Fatalf("task %s not completed after it ended", task.UPID)
	}
	return task
}

func mustOK(t *testing.T, s *pvesim.Sim, task *proxmox.Task, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	task = waitTask(t, s, task)
	if !task.IsSuccessful {
		t.Fatalf("task %s failed: %q", task.UPID, task.ExitStatus)
	}
}

// raw performs a request and returns status line, and decoded body.
func raw(t *testing.T, method, url string, hdr map[string]string, body string) (*http.Response, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := httpClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var m map[string]any
	_ = json.UnmarshalRead(res.Body, &m)
	return res, m
}

func tokenHdr() map[string]string {
	return map[string]string{"Authorization": "PVEAPIToken=" + tokenID + "=" + tokenSecret}
}

func rawData(t *testing.T, c *proxmox.Client, path string) any {
	t.Helper()
	var v any
	if err := c.Get(context.Background(), path, &v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return v
}

func errContains(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want it to contain %q", err, want)
	}
}
