package bus_test

import (
	"strings"
	"testing"

	"github.com/converge-pve/converge/internal/bus"
)

func TestDefaultConfigValidates(t *testing.T) {
	c := bus.DefaultConfig()
	c.URLs = "nats://127.0.0.1:4222"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

// A literal built without the defaults is refused, naming the field,
// rather than read as the defaults.
func TestZeroConfigRefused(t *testing.T) {
	if err := (bus.Config{URLs: "nats://127.0.0.1:4222"}).Validate(); err == nil || !strings.HasPrefix(err.Error(), "bus.Config.Stream: must be set") {
		t.Fatalf("Config{URLs}: %v, want an error naming bus.Config.Stream", err)
	}
	c := bus.DefaultConfig()
	c.URLs, c.Partitions = "nats://127.0.0.1:4222", 0
	if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), "bus.Config.Partitions: must be within 1..1024, got 0") {
		t.Fatalf("Partitions 0: %v", err)
	}
}
