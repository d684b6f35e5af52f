package main

import (
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/converge-pve/converge/internal/app"
)

// Heartbeats and observed snapshots were kept forever unless a retention
// flag was set: an idle installation's journal grew by about 1.9 MB a
// day. By default they now carry a per-message TTL, valid for the
// observer at its default interval; desired events, actions and results
// keep none (they are not the observer's).
func TestDefaultObservedRetention(t *testing.T) {
	f := &roleFlags{}
	cmd := &cobra.Command{Use: "x"}
	addRoleFlags(cmd, f, "")
	if err := cmd.ParseFlags(nil); err != nil {
		t.Fatal(err)
	}
	cfg, err := f.appConfig(&globals{}, app.Roles{Observer: true}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Observer.ObservedTTL != DefaultObservedRetention || DefaultObservedRetention <= 0 {
		t.Fatalf("default observed retention %s, want %s", cfg.Observer.ObservedTTL, DefaultObservedRetention)
	}
	oc := cfg.Observer
	if oc.ObservedTTL < 4*oc.Interval { // the observer's own bound
		t.Fatalf("observed retention %s is under 4 × the observe interval %s", oc.ObservedTTL, oc.Interval)
	}
	if oc.ObservedTTL > 48*time.Hour {
		t.Fatalf("observed retention %s: the idle journal holds more than two days of heartbeats", oc.ObservedTTL)
	}
}
