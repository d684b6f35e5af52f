package pve_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/pvesim"
)

// TestSetPoolMessage: a failed pool change reads as what was asked and
// Proxmox's answer (it becomes the guest's status reason), not as
// "pve set-pool: terminal: …"; its class and *pve.Error stay reachable.
func TestSetPoolMessage(t *testing.T) {
	s := startSim(t, pvesim.Options{})
	if err := s.AddGuest(pvesim.GuestSpec{VMID: 100}); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, s)
	ctx := tctx(t)
	for _, tc := range []struct {
		name   string
		err    error
		class  pve.Class
		status int
		want   string
	}{
		{"missing pool", c.SetPool(ctx, "nope", 100, false), pve.ClassTerminal, 500,
			`moving guest 100 into pool "nope" failed: pool "nope" does not exist in Proxmox`},
		{"out of a missing pool", c.SetPool(ctx, "gone", 100, true), pve.ClassTerminal, 500,
			`taking guest 100 out of pool "gone" failed: pool "gone" does not exist in Proxmox`},
		{"bad pool name", c.SetPool(ctx, "bad pool", 100, false), pve.ClassTerminal, 0,
			`moving guest 100 into pool "bad pool" failed: pool id "bad pool" is not a valid PVE pool name`},
		{"bad vmid", c.SetPool(ctx, "web", 7, false), pve.ClassTerminal, 0,
			`moving guest 7 into pool "web" failed: vmid 7 out of range`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantClass(t, tc.err, tc.class)
			msg := tc.err.Error()
			if !strings.HasPrefix(msg, tc.want) {
				t.Errorf("message %q, want %q", msg, tc.want)
			}
			for _, jargon := range []string{"pve ", "set-pool", "terminal"} {
				if strings.Contains(msg, jargon) {
					t.Errorf("message %q says %q", msg, jargon)
				}
			}
			var pe *pve.Error
			if !errors.As(tc.err, &pe) || pe.Op != pve.OpSetPool || pe.Status != tc.status {
				t.Errorf("errors.As *pve.Error: %+v, want op %s, status %d", pe, pve.OpSetPool, tc.status)
			}
		})
	}
	// The executor tells a missing pool by these words (executor/whole.go).
	if err := c.SetPool(ctx, "nope", 100, false); !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing pool: %v", err)
	}
	// Already done stays Proxmox's own message, for the result's reason.
	if err := c.CreatePool(ctx, "web", ""); err != nil {
		t.Fatal(err)
	}
	if err := c.SetPool(ctx, "web", 100, false); err != nil {
		t.Fatal(err)
	}
	err := c.SetPool(ctx, "web", 100, false)
	wantClass(t, err, pve.ClassAlreadyDone)
	if pe := (*pve.Error)(nil); !errors.As(err, &pe) || pe.Message == "" {
		t.Errorf("already done: %v", err)
	}
}
