package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
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
		"--token", "root@pam!ci=abc123", "--password", "pw", "-o", "json", "--log-level", "error"})
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
	if err := json.NewDecoder(pr).Decode(&info); err != nil {
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
	if rs, err := cl.Resources(ctx, "vm"); err != nil || len(rs) != 6 {
		t.Fatalf("resources: %d %v", len(rs), err)
	}
	pw2 := proxmox.NewClient(info.URL, proxmox.WithHTTPClient(hc),
		proxmox.WithCredentials(&proxmox.Credentials{Username: info.User, Password: info.Password}))
	if _, err := pw2.Version(ctx); err != nil {
		t.Fatalf("password login: %v", err)
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
