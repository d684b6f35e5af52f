package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	proxmox "github.com/luthermonson/go-proxmox"
)

// TestSimCommand runs `converge sim` as a user would, reads the URL and
// credentials it prints, and drives it with go-proxmox using both.
func TestSimCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pr, pw := io.Pipe()
	root := newRoot()
	root.SetArgs([]string{"sim", "--listen", "127.0.0.1:0", "--nodes", "2", "--guests", "4",
		"--token", "root@pam!ci=abc123", "--password", "pw", "-o", "json", "--log-level", "error", "--mutation-log", "-"})
	root.SetOut(pw)
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()

	var info struct {
		URL      string            `json:"url"`
		User     string            `json:"user"`
		Password string            `json:"password"`
		Tokens   map[string]string `json:"tokens"`
		Nodes    []string          `json:"nodes"`
		Guests   int               `json:"guests"`
	}
	dec := json.NewDecoder(pr)
	if err := dec.Decode(&info); err != nil {
		t.Fatal(err)
	}
	if info.User != "root@pam" || info.Password != "pw" || info.Tokens["root@pam!ci"] != "abc123" || len(info.Nodes) != 2 || info.Guests != 6 {
		t.Fatalf("printed info: %+v", info)
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	tok := proxmox.NewClient(info.URL, proxmox.WithHTTPClient(hc), proxmox.WithAPIToken("root@pam!ci", "abc123"))
	cl, err := tok.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := cl.Resources(ctx, "vm")
	if err != nil || len(rs) != 6 {
		t.Fatalf("resources: %d %v", len(rs), err)
	}
	// A mutation is logged, after the address, as one JSON line.
	var vm *proxmox.ClusterResource
	for _, r := range rs {
		if r.Type == "qemu" && r.Template == 0 {
			vm = r
			break
		}
	}
	if vm == nil {
		t.Fatalf("no QEMU guest among %d resources", len(rs))
	}
	node, err := tok.Node(ctx, vm.Node)
	if err != nil {
		t.Fatal(err)
	}
	guest, err := node.VirtualMachine(ctx, int(vm.VMID))
	if err != nil {
		t.Fatal(err)
	}
	var line struct {
		At       time.Time `json:"at"`
		AtUnixNs int64     `json:"at_unix_ns"`
		Method   string    `json:"method"`
		Path     string    `json:"path"`
		VMID     int       `json:"vmid"`
	}
	// Read alongside the call: the pipe does not buffer.
	read := make(chan error, 1)
	go func() { read <- dec.Decode(&line) }()
	before := time.Now()
	if _, err := guest.Config(ctx, proxmox.VirtualMachineOption{Name: "description", Value: "logged"}); err != nil {
		t.Fatal(err)
	}
	if err := <-read; err != nil {
		t.Fatal(err)
	}
	if line.Method != http.MethodPost || line.VMID != int(vm.VMID) || line.Path != "/api2/json/nodes/"+vm.Node+"/qemu/"+strconv.Itoa(int(vm.VMID))+"/config" ||
		line.AtUnixNs != line.At.UnixNano() || line.At.Before(before.Add(-time.Second)) {
		t.Fatalf("mutation line %+v", line)
	}
	pw2 := proxmox.NewClient(info.URL, proxmox.WithHTTPClient(hc),
		proxmox.WithCredentials(&proxmox.Credentials{Username: info.User, Password: info.Password}))
	if v, err := pw2.Version(ctx); err != nil || !strings.HasPrefix(v.Release, "9.") {
		t.Fatalf("password login: %+v %v, want the default release, PVE 9", v, err)
	}
	cancel() // what SIGINT does: the command returns cleanly
	if err := <-done; err != nil {
		t.Fatalf("sim exited with %v", err)
	}
}

func TestSimCommandRejectsBadToken(t *testing.T) {
	root := newRoot()
	root.SetArgs([]string{"sim", "--listen", "127.0.0.1:0", "--token", "nosecret"})
	root.SetOut(io.Discard)
	err := root.ExecuteContext(context.Background())
	if err == nil || err.Error() != `--token "nosecret": want ID=SECRET, e.g. root@pam!converge=s3cret` {
		t.Fatalf("got %v", err)
	}
}

// TestSimCommandTaskLatencyType: --task-latency-type sets a latency per
// task type, which the fault endpoint shows; a type the simulator does not
// run is a usage error.
func TestSimCommandTaskLatencyType(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pr, pw := io.Pipe()
	root := newRoot()
	root.SetArgs([]string{"sim", "--listen", "127.0.0.1:0", "--task-latency", "50ms", "--task-latency-type", "qmstart=1s",
		"--task-latency-type", "qmconfig=200ms", "-o", "json", "--log-level", "error"})
	root.SetOut(pw)
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	var info struct {
		ControlURL string `json:"control_url"`
	}
	if err := json.NewDecoder(pr).Decode(&info); err != nil {
		t.Fatal(err)
	}
	res, err := (&http.Client{Timeout: 10 * time.Second}).Get(info.ControlURL + "/faults")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		TaskLatency string            `json:"task_latency"`
		ByType      map[string]string `json:"task_latency_by_type"`
	}
	err = json.NewDecoder(res.Body).Decode(&f)
	res.Body.Close()
	if err != nil || f.TaskLatency != "50ms" || len(f.ByType) != 2 || f.ByType["qmstart"] != "1s" || f.ByType["qmconfig"] != "200ms" {
		t.Fatalf("faults %+v %v", f, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("sim exited with %v", err)
	}

	root = newRoot()
	root.SetArgs([]string{"sim", "--listen", "127.0.0.1:0", "--task-latency-type", "start=1s"})
	root.SetOut(io.Discard)
	err = root.ExecuteContext(context.Background())
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), `--task-latency-type "start=1s"`) {
		t.Fatalf("got %v", err)
	}
}

// --ha-rebalance takes an interval, or 0/off for no load balancer; a
// negative or unreadable one is refused with the flag named.
func TestParseRebalance(t *testing.T) {
	for in, want := range map[string]time.Duration{"off": 0, "0": 0, "": 0, "10s": 10 * time.Second, "250ms": 250 * time.Millisecond} {
		if got, err := parseRebalance(in); err != nil || got != want {
			t.Errorf("%q: %v %v, want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"-1s", "soon", "10"} {
		if _, err := parseRebalance(in); err == nil || !strings.Contains(err.Error(), "--ha-rebalance") {
			t.Errorf("%q: %v, want a refusal naming the flag", in, err)
		}
	}
}
