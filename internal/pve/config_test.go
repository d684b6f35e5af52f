package pve

import (
	"strings"
	"testing"
)

func TestDefaultConfigValidates(t *testing.T) {
	c := DefaultConfig()
	c.URL, c.TokenID, c.TokenSecret = "https://pve1:8006", "converge@pve!converge", "s"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

// A literal built without the defaults is refused, naming the field,
// rather than read as the defaults.
func TestZeroConfigRefused(t *testing.T) {
	if err := (Config{}).Validate(); err == nil || !strings.HasPrefix(err.Error(), "pve.Config.URL: must be set") {
		t.Fatalf("Config{}: %v, want an error naming pve.Config.URL", err)
	}
	c := Config{URL: "https://pve1:8006", TokenID: "converge@pve!converge", TokenSecret: "s"}
	if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), "pve.Config.Timeout: must be > 0, got 0s") {
		t.Fatalf("Config without a Timeout: %v", err)
	}
}
