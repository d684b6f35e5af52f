package bench

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// A simulator command that never prints its address fails the start with
// why; one that dies later ends the run with its exit status.
func TestExternalSimulatorFailures(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o := DefaultOptions()
	o.Guests = 1
	o.FollowGuests()
	_, err := startExternal(ctx, []string{"sh", "-c", "echo not-json; exit 0"}, o, zerolog.Nop(),
		func(int, int64) {}, func(error) {})
	if err == nil || !strings.Contains(err.Error(), "the simulator's address") {
		t.Fatalf("got %v", err)
	}

	// Prints an address and one mutation, then dies.
	script := `echo '{"url":"http://127.0.0.1:1/api2/json","control_url":"http://127.0.0.1:1/_sim"}'; ` +
		`echo '{"at_unix_ns":42,"vmid":105}'; exit 3`
	failed := make(chan error, 1)
	got := make(chan [2]int64, 1)
	s, err := startExternal(ctx, []string{"sh", "-c", script}, o, zerolog.Nop(),
		func(vmid int, at int64) { got <- [2]int64{int64(vmid), at} }, func(err error) { failed <- err })
	if err != nil {
		t.Fatal(err)
	}
	if m := <-got; m != [2]int64{105, 42} {
		t.Fatalf("mutation %v", m)
	}
	select {
	case err := <-failed:
		if err == nil || !strings.Contains(err.Error(), "the simulator exited during the run: exit status 3") {
			t.Fatalf("failure %v", err)
		}
	case <-ctx.Done():
		t.Fatal(errors.New("no failure reported"))
	}
	_ = s.Close()
}
