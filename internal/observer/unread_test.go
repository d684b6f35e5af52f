package observer_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/pve"
)

// brokenOne fails every config read of one guest, as a node that is down
// (595 no route to host) does.
type brokenOne struct {
	*countingPVE
	bad int
}

func (b brokenOne) GuestConfig(ctx context.Context, r pve.GuestRef) (*pve.GuestConfig, error) {
	if r.VMID == b.bad {
		return nil, &pve.Error{Class: pve.ClassTransient, Message: "595 no route to host (node offline)", Err: errors.New("595")}
	}
	return b.countingPVE.GuestConfig(ctx, r)
}

// One unreadable guest must not keep every pass from vouching for the
// inventory (no missing guest would ever be created or explained): the
// pass is complete and names the guest it could not read, which exists
// though nothing of it is journalled.
func TestOneUnreadableGuestNamedNotStalling(t *testing.T) {
	px := brokenOne{newCountingPVE(3), 101}
	clk := newClock()
	o, _ := memObserver(t, px, clk)
	for range 2 {
		st := pass(t, o)
		if !st.Complete || st.ConfigErrors != 1 || !slices.Equal(st.Unread, []int{101}) {
			t.Fatalf("pass: complete=%v config_errors=%d unread=%v, want complete, 1 error, unread [101]", st.Complete, st.ConfigErrors, st.Unread)
		}
		clk.Advance(10 * time.Second)
	}
}
