package api_test

import (
	"strings"
	"testing"

	"github.com/converge-pve/converge/internal/api"
)

func TestDefaultLimitsValidate(t *testing.T) {
	if err := api.DefaultLimits().Validate(); err != nil {
		t.Fatal(err)
	}
}

// Limits built without the defaults are refused, naming the field,
// rather than read as the defaults.
func TestZeroLimitsRefused(t *testing.T) {
	if err := (api.Limits{}).Validate(); err == nil || !strings.HasPrefix(err.Error(), "api.Limits.ReadHeaderTimeout: must be > 0") {
		t.Fatalf("Limits{}: %v", err)
	}
	l := api.DefaultLimits()
	l.MaxConns = 0
	if err := l.Validate(); err == nil || !strings.HasPrefix(err.Error(), "api.Limits.MaxConns: must be >= 1, got 0") {
		t.Fatalf("MaxConns 0: %v", err)
	}
}
