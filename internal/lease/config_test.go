package lease_test

import (
	"strings"
	"testing"

	"github.com/converge-pve/converge/internal/lease"
)

// config is the default Config of a member of group.
func config(group, member string, partitions int) lease.Config {
	c := lease.DefaultConfig()
	c.Group, c.Member, c.Partitions = group, member, partitions
	return c
}

func TestDefaultConfigValidates(t *testing.T) {
	if err := config("executor-pve", "m1", 16).Validate(); err != nil {
		t.Fatal(err)
	}
}

// A zero field is refused, naming it, rather than read as a default.
func TestZeroConfigRefused(t *testing.T) {
	if err := (lease.Config{}).Validate(); err == nil || !strings.HasPrefix(err.Error(), "lease.Config.Group: ") {
		t.Fatalf("Config{}: %v, want an error naming lease.Config.Group", err)
	}
	c := config("executor-pve", "m1", 16)
	c.TTL = 0
	if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), "lease.Config.TTL: must be at least") {
		t.Fatalf("TTL 0: %v", err)
	}
}
