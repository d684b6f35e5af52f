package planloop_test

import (
	"strings"
	"testing"

	"github.com/converge-pve/converge/internal/planloop"
)

func TestDefaultConfigValidates(t *testing.T) {
	if err := planloop.DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

// A literal built without the defaults is refused, naming the field,
// rather than read as the defaults.
func TestZeroConfigRefused(t *testing.T) {
	if err := (planloop.Config{}).Validate(); err == nil || !strings.HasPrefix(err.Error(), "planloop.Config.Stream: must be set") {
		t.Fatalf("Config{}: %v, want an error naming planloop.Config.Stream", err)
	}
	c := planloop.DefaultConfig()
	c.Planner.Limits.CreateRate = 0
	if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), "planner.Limits.CreateRate: must be >= 1 (or unlimited), got 0") {
		t.Fatalf("CreateRate 0: %v", err)
	}
}
