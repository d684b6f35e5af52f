package pve

import (
	"context"
	"errors"
	"testing"
)

func TestNodeOfPath(t *testing.T) {
	for path, want := range map[string]string{
		"/api2/json/nodes/pve1/qemu/101/config": "pve1",
		"/api2/json/nodes/pve2":                 "pve2",
		"/api2/json/cluster/resources":          "",
		"/api2/json/version":                    "",
		"/proxy/api2/json/nodes/pve3/tasks/x":   "pve3",
	} {
		if got := nodeOfPath(path); got != want {
			t.Errorf("nodeOfPath(%q) = %q, want %q", path, got, want)
		}
	}
}

// A node's calls beyond its slots wait; other nodes' and the cluster-wide
// paths' do not wait for them; a freed slot lets the next one in.
func TestNodeSlotsBoundCallsPerNode(t *testing.T) {
	s := newNodeSlots(DefaultNodeCalls)
	ctx := context.Background()
	var held []func()
	for range DefaultNodeCalls {
		r, err := s.acquire(ctx, "/api2/json/nodes/pve1/qemu/101/config")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, r)
	}
	done, cancel := context.WithCancel(ctx)
	cancel() // a full node's channel is not ready: only Done can be chosen
	if _, err := s.acquire(done, "/api2/json/nodes/pve1/status"); !errors.Is(err, context.Canceled) {
		t.Fatalf("a 4th call to pve1 got a slot (err %v); want it to wait", err)
	}
	for _, p := range []string{"/api2/json/nodes/pve2/qemu/201/config", "/api2/json/cluster/resources"} {
		r, err := s.acquire(ctx, p)
		if err != nil {
			t.Fatalf("%s waited for pve1's slots: %v", p, err)
		}
		r()
	}
	held[0]()
	r, err := s.acquire(ctx, "/api2/json/nodes/pve1/status")
	if err != nil {
		t.Fatal(err)
	}
	r()
	if newNodeSlots(0) != nil {
		t.Fatal("NodeCalls 0 must be no limit")
	}
	if r, err := (*nodeSlots)(nil).acquire(done, "/api2/json/nodes/pve1"); err != nil {
		t.Fatalf("no limit waited: %v", err)
	} else {
		r()
	}
}

func TestNodeCallsValidated(t *testing.T) {
	c := DefaultConfig()
	c.URL, c.TokenID, c.TokenSecret = "https://pve1:8006", "root@pam!x", "s"
	if c.NodeCalls != DefaultNodeCalls {
		t.Fatalf("default NodeCalls %d, want %d", c.NodeCalls, DefaultNodeCalls)
	}
	c.NodeCalls = -1
	if _, err := c.checked(); err == nil {
		t.Fatal("NodeCalls -1 accepted")
	}
}
