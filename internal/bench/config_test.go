package bench_test

import (
	"strings"
	"testing"

	"github.com/converge-pve/converge/internal/bench"
)

func TestDefaultOptionsValidate(t *testing.T) {
	if err := bench.DefaultOptions().Validate(); err != nil {
		t.Fatal(err)
	}
	if err := bench.DefaultProxmoxOptions().Validate(); err != nil {
		t.Fatal(err)
	}
}

// Options built without the defaults are refused, naming the field,
// rather than read as the defaults.
func TestZeroOptionsRefused(t *testing.T) {
	if err := (bench.Options{}).Validate(); err == nil || !strings.HasPrefix(err.Error(), "bench.Options.Guests: must be within") {
		t.Fatalf("Options{}: %v", err)
	}
	if err := (bench.ProxmoxOptions{}).Validate(); err == nil || !strings.HasPrefix(err.Error(), "bench.ProxmoxOptions.Guests: must be within") {
		t.Fatalf("ProxmoxOptions{}: %v", err)
	}
	o := bench.DefaultOptions()
	o.BurstChanges = 0 // no burst: a value, not the default
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
}
