package main

import (
	"context"
	"errors"
	"io"
	"testing"
)

// TestBenchFailoverFlags: the failover profile's own flags are refused by
// the other profiles, and the flags it does not take by it; none of these
// runs anything.
func TestBenchFailoverFlags(t *testing.T) {
	for _, bad := range [][]string{
		{"bench", "--kills", "3"},
		{"bench", "--profile", "proxmox", "--lease-ttl", "2s"},
		{"bench", "--profile", "failover", "--changes", "10"},
		{"bench", "--profile", "failover", "--node-rate", "5"},
		{"bench", "--profile", "failover", "--executors", "1"},
		{"bench", "--profile", "failover", "--pauses", "-1"},
	} {
		root := newRoot()
		root.SetArgs(bad)
		root.SetOut(io.Discard)
		root.SetErr(io.Discard)
		var ue usageError
		if err := root.ExecuteContext(context.Background()); !errors.As(err, &ue) {
			t.Errorf("%v: got %v, want a usage error", bad, err)
		}
	}
}
