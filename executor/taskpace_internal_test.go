package executor

import (
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
)

// The expected length of a node's tasks settles near what they take:
// down 10 % when found finished at the first poll, half-way up when not,
// never above maxExpect, and per node, operation and guest kind.
func TestTaskPaceLearns(t *testing.T) {
	var p taskPace
	op := paceKind{op: events.OpStart, kind: events.QEMU}
	shutdown := paceKind{op: events.OpShutdown, kind: events.QEMU}
	if e := p.expect("pve1", op); e != 0 {
		t.Fatalf("unknown task expected to take %s", e)
	}
	// First wait, doubling pauses from 20 ms: found after 1.26 s.
	p.observe("pve1", op, 0, 1260*time.Millisecond, 7)
	if e := p.expect("pve1", op); e != 630*time.Millisecond {
		t.Fatalf("after a doubling wait: %s", e)
	}
	// Tasks of 1 s: the estimate climbs to them, then hovers just under.
	task := time.Second
	for range 20 {
		e := p.expect("pve1", op)
		if e >= task {
			p.observe("pve1", op, e, e, 1)
		} else {
			p.observe("pve1", op, e, task+20*time.Millisecond, 2)
		}
	}
	if e := p.expect("pve1", op); e < 850*time.Millisecond || e > task+20*time.Millisecond {
		t.Errorf("after 20 tasks of 1 s, expected %s", e)
	}
	// Another node starts from pve1's estimate, then keeps its own.
	if e, want := p.expect("pve2", op), p.expect("pve1", op); e != want {
		t.Errorf("a node with no estimate of its own expects %s, want pve1's %s", e, want)
	}
	p.observe("pve2", op, 0, 4*time.Second, 7)
	if e := p.expect("pve2", op); e != 2*time.Second {
		t.Errorf("pve2 after its own task: %s", e)
	}
	if e := p.expect("pve1", op); e > task+20*time.Millisecond {
		t.Errorf("pve2's task changed pve1's estimate: %s", e)
	}
	if e := p.expect("pve1", shutdown); e != 0 {
		t.Errorf("another operation's tasks learnt: %s", e)
	}
	p.observe("pve1", shutdown, 0, 10*time.Minute, 30)
	if e := p.expect("pve1", shutdown); e != maxExpect {
		t.Errorf("a 10 min task: expected %s, want the cap %s", e, maxExpect)
	}
	// One long task among short ones (a forced shutdown): the estimate at
	// most doubles, and is back under a second within seven short ones.
	p.observe("pve1", op, p.expect("pve1", op), 10*time.Minute, 30)
	if e := p.expect("pve1", op); e > 2*time.Second {
		t.Errorf("after one 10 min task: expected %s", e)
	}
	for range 7 {
		e := p.expect("pve1", op)
		p.observe("pve1", op, e, e, 1)
	}
	if e := p.expect("pve1", op); e > time.Second {
		t.Errorf("after seven short tasks: expected %s", e)
	}
}

// A container's clones and a VM's are learnt apart: VM clones made long
// by their storage's lock do not push the container template's first
// poll past its clone's end.
func TestTaskPaceByKind(t *testing.T) {
	var p taskPace
	ct := paceKind{op: events.OpClone, kind: events.LXC}
	vm := paceKind{op: events.OpClone, kind: events.QEMU}
	p.observe("pve1", ct, 0, 2*time.Second, 7)
	p.observe("pve1", vm, 0, 8*time.Second, 12)
	if c, v := p.expect("pve1", ct), p.expect("pve1", vm); c != time.Second || v != 4*time.Second {
		t.Fatalf("container clones expected %s, VM clones %s; want 1s, 4s", c, v)
	}
}

// A task found running at its expected end is polled every fiftieth of
// that (at least 25 ms) for half as long again (at least 25 polls): at
// most 25 polls more however long the task.
func TestAfterExpect(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct{ e, window, every time.Duration }{
		{0, 625 * ms, 25 * ms}, {time.Second, 625 * ms, 25 * ms},
		{2500 * ms, 1250 * ms, 50 * ms}, {maxExpect, 5 * time.Second, 200 * ms},
	} {
		w, p := afterExpect(c.e), afterExpectPoll(c.e)
		if w != c.window || p != c.every {
			t.Errorf("expected %s: every %s for %s, want every %s for %s", c.e, p, w, c.every, c.window)
		}
		if w/p > 25 {
			t.Errorf("expected %s: %d polls in the window", c.e, w/p)
		}
	}
}
