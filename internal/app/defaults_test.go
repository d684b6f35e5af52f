package app_test

import (
	"strings"
	"testing"

	"github.com/converge-pve/converge/internal/app"
	"github.com/converge-pve/converge/internal/natsserver"
)

// DefaultConfig validates once it has what only the caller can give: a
// role and a NATS.
func TestDefaultConfigValidates(t *testing.T) {
	c := app.DefaultConfig()
	c.Roles, c.Embedded = app.Roles{Planner: true}, &natsserver.Options{}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := app.DefaultReadyConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

// A literal built without the defaults is refused, naming the field,
// rather than read as the defaults; so is a role's config within it.
func TestZeroConfigRefused(t *testing.T) {
	if err := (app.Config{}).Validate(); err == nil || !strings.HasPrefix(err.Error(), "app.Config.Cluster: ") {
		t.Fatalf("Config{}: %v, want an error naming app.Config.Cluster", err)
	}
	if err := (app.ReadyConfig{}).Validate(); err == nil || !strings.HasPrefix(err.Error(), "app.ReadyConfig.Interval: must be > 0") {
		t.Fatalf("ReadyConfig{}: %v", err)
	}
	c := app.DefaultConfig()
	c.Roles, c.Embedded = app.Roles{Planner: true}, &natsserver.Options{}
	c.Observer.Interval = 0
	if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), "observer.Config.Interval: must be > 0") {
		t.Fatalf("observer interval 0: %v", err)
	}
	c = app.DefaultConfig()
	c.Roles, c.Embedded = app.Roles{Planner: true}, &natsserver.Options{}
	c.Executors = 0
	if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), "app.Config.Executors: ") {
		t.Fatalf("no executors: %v", err)
	}
}
