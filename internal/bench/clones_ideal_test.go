package bench

import (
	"testing"
	"time"
)

func TestCloneIdeal(t *testing.T) {
	s := time.Second
	q := func(tpl int, st string) IdealClone {
		return IdealClone{Template: tpl, Storage: st, Node: "pve1", Shared: true}
	}
	local := func(st, node string) IdealClone { return IdealClone{Template: 9000, Storage: st, Node: node} }
	ct := func(tpl int, st string) IdealClone {
		return IdealClone{LXC: true, Template: tpl, Storage: st, Node: "pve1"}
	}
	for _, c := range []struct {
		name string
		in   CloneIdealInput
		want time.Duration
		why  string
	}{
		// 10 QEMU clones of one template: parallel (shared source lock);
		// the lock holds 10 × 0.1 s = 1 s < one clone's 0.1 + 2 s.
		{"qemu parallel", CloneIdealInput{Clones: rep(10, q(9000, "a")), QEMUClone: 2 * s, LockHold: s / 10}, 2100 * time.Millisecond, "one clone"},
		// The same with a 0.5 s hold: 10 × 0.5 = 5 s on one storage's lock.
		{"storage lock", CloneIdealInput{Clones: rep(10, q(9000, "a")), QEMUClone: 2 * s, LockHold: s / 2}, 5 * s, "storage a's lock"},
		// Split over two storages: 6 × 0.5 = 3 s on a's (4 × 0.5 on b's).
		{"two storages", CloneIdealInput{Clones: append(rep(4, q(9000, "b")), rep(6, q(9000, "a"))...), QEMUClone: 2 * s, LockHold: s / 2}, 3 * s, "storage a's lock"},
		// A local storage's lock is each node's: 6 on pve1's, 4 on pve2's
		// (as one shared storage, 10 × 0.5 = 5 s).
		{"local storage", CloneIdealInput{Clones: append(rep(4, local("a", "pve2")), rep(6, local("a", "pve1"))...), QEMUClone: 2 * s, LockHold: s / 2}, 3 * s, "storage a on pve1's lock"},
		// 4 container clones of template 9001, 1 of 9003: 4 × (0.1 + 3 s),
		// plus two 20 ms calls and a 0.2 s config write: 12.64 s.
		{"ct template", CloneIdealInput{Clones: append(rep(4, ct(9001, "a")), ct(9003, "b")), LXCClone: 3 * s, LockHold: s / 10,
			APILatency: 20 * time.Millisecond, ConfigWrite: s / 5}, 12640 * time.Millisecond, "container template 9001"},
		// 30 config writes of 1 s on 3 workers: 10 s, above the 2 s task.
		{"pvedaemon", CloneIdealInput{Clones: rep(30, q(9000, "")), QEMUClone: s, ConfigWrite: s, Workers: 3}, 10 * s, "node pve1's pvedaemon"},
	} {
		got, why := CloneIdeal(c.in)
		if got != c.want || why != c.why {
			t.Errorf("%s: CloneIdeal = %v (%s), want %v (%s)", c.name, got, why, c.want, c.why)
		}
	}
}

func rep(n int, c IdealClone) []IdealClone {
	out := make([]IdealClone, n)
	for i := range out {
		out[i] = c
	}
	return out
}
