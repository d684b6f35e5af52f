package bench

import (
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/pvesim"
)

// The chain of the container template whose clones end last adds up to
// the makespan: its start, its tasks (their own length and their lock
// waits), the gaps between them and the tail.
func TestCTChain(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	task := func(typ, id string, start, end int) pvesim.TaskInfo {
		return pvesim.TaskInfo{Type: typ, ID: id, Start: at(start), End: at(end)}
	}
	clones := []pvesim.TaskInfo{
		task("vzclone", "9001", 3500, 6000), // second: 2.5 s, after a 0.5 s gap
		task("vzclone", "9001", 1000, 3000), // first: 2 s, 0.5 s of it on the lock
		task("vzclone", "9003", 1000, 2500),
		task("qmclone", "9000", 0, 9000),
	}
	c := ctChain(clones, t0, at(6300), 1500*time.Millisecond)
	want := CTChain{Template: 9001, Clones: 2, StartS: 1, LockWaitS: 1.5, GapsS: 0.5, TailS: 0.3}
	if c == nil || *c != want {
		t.Fatalf("ctChain = %+v, want %+v", c, want)
	}
	if sum := c.StartS + 2*1.5 + c.LockWaitS + c.GapsS + c.TailS; sum < 6.3-1e-9 || sum > 6.3+1e-9 {
		t.Errorf("the chain adds up to %v s, the makespan is 6.3 s", sum)
	}
	if ctChain(clones[3:], t0, at(9000), time.Second) != nil {
		t.Error("a chain without container clones")
	}
}
