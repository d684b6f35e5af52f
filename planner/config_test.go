package planner

import (
	"strings"
	"testing"
)

// configNamed is the default Config of a planner named name.
func configNamed(name string) Config {
	c := DefaultConfig()
	c.Name = name
	return c
}

func TestDefaultConfigValidates(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	if err := DefaultPolicy().Validate(); err != nil {
		t.Fatal(err)
	}
	if err := DefaultLimits().Validate(); err != nil {
		t.Fatal(err)
	}
}

// A literal built without the defaults is refused, naming the field,
// rather than read as the defaults.
func TestZeroConfigRefused(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"Config{}", Config{}.Validate(), "planner.Config.Cluster: "},
		{"Policy{}", Policy{}.Validate(), "planner.Policy.ObserverTimeout: must be > 0"},
		{"Limits{}", Limits{}.Validate(), "planner.Limits.NodeConcurrency: must be >= 1 (or unlimited), got 0"},
	} {
		if c.err == nil || !strings.HasPrefix(c.err.Error(), c.want) {
			t.Errorf("%s: %v, want %q…", c.name, c.err, c.want)
		}
	}
}

// No limit is said by the limit's Unlimited field, whatever its number.
func TestLimitsUnlimited(t *testing.T) {
	l := DefaultLimits()
	l.NodeConcurrency, l.NodeConcurrencyUnlimited = 0, true
	l.CloneConcurrency, l.CloneConcurrencyUnlimited = 0, true
	l.CreateRate, l.CreateRateUnlimited = 0, true
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	if l.node() != 0 || l.clone() != 0 || l.create() != 0 {
		t.Fatalf("unlimited limits count as %d, %d, %d; want 0 (none)", l.node(), l.clone(), l.create())
	}
}
