package executor_test

import (
	"strings"
	"testing"

	"github.com/converge-pve/converge/executor"
)

func TestDefaultConfigValidates(t *testing.T) {
	if err := executor.DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

// A literal built without the defaults is refused, naming the field,
// rather than read as the defaults.
func TestZeroConfigRefused(t *testing.T) {
	if err := (executor.Config{}).Validate(); err == nil || !strings.HasPrefix(err.Error(), "executor.Config.Cluster: ") {
		t.Fatalf("Config{}: %v, want an error naming executor.Config.Cluster", err)
	}
	for _, c := range []struct {
		mod  func(*executor.Config)
		want string
	}{
		{func(c *executor.Config) { c.Concurrency = 0 }, "executor.Config.Concurrency: must be >= 1, got 0"},
		{func(c *executor.Config) { c.NodeRate, c.NodeRateUnlimited = 0, false }, "executor.Config.NodeRate: must be > 0"},
		{func(c *executor.Config) { c.NodeRate, c.NodeRateUnlimited = -1, false }, "executor.Config.NodeRate: must be > 0"},
		{func(c *executor.Config) { c.AckWait = 0 }, "executor.Config.AckWait: must be at least"},
		{func(c *executor.Config) { c.Policy.MaxBurst = 0 }, "planner.Policy.MaxBurst: must be >= 1"},
	} {
		cfg := executor.DefaultConfig()
		c.mod(&cfg)
		if err := cfg.Validate(); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%v, want %q…", err, c.want)
		}
	}
	cfg := executor.DefaultConfig()
	cfg.NodeRate, cfg.NodeRateUnlimited = 0, true
	if err := cfg.Validate(); err != nil {
		t.Fatalf("an unlimited node rate: %v", err)
	}
}
