package pvesim

import (
	"testing"
)

// TestTaskLogBoundedAndReleased: the task log keeps at most MaxTasks plus an
// eighth, drops the oldest finished tasks first and forgets them in the
// index too, never drops a running task, and a finished task no longer holds
// its work and abort closures (they keep the request and the guest alive).
func TestTaskLogBoundedAndReleased(t *testing.T) {
	s, err := New(Options{Guests: 1, MaxTasks: 16})
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// A task that never finishes on its own (its latency timer is stopped by
	// the test's end), started first so that it is the oldest.
	s.faults.TaskLatency = Duration(1 << 62)
	running := s.startTask("pve1", "qmstart", QEMU, 100, "root@pam", func() ([]string, error) { return nil, nil }, nil)
	defer running.timer.Stop()
	s.faults.TaskLatency = 0
	var upids []string
	for i := 0; i < 100; i++ {
		released := false
		tk := s.startTask("pve1", "qmconfig", QEMU, 100, "root@pam", func() ([]string, error) { return nil, nil }, func() { released = true })
		if tk.running || tk.work != nil || tk.abort != nil || tk.timer != nil || released {
			t.Fatalf("task %d: finished task still holds its closures (running %v, work %v, abort %v)", i, tk.running, tk.work != nil, tk.abort != nil)
		}
		upids = append(upids, tk.upid)
		if n := len(s.tasks); n > 16+16/8 {
			t.Fatalf("after %d tasks the log holds %d, bound is %d", i+2, n, 16+16/8)
		}
		if len(s.taskIdx) != len(s.tasks) {
			t.Fatalf("index holds %d tasks, log %d", len(s.taskIdx), len(s.tasks))
		}
	}
	if s.tasks[0] != running {
		t.Fatalf("the running task was dropped from the log")
	}
	newest := s.tasks[len(s.tasks)-1]
	if newest.upid != upids[len(upids)-1] {
		t.Fatalf("newest task in the log is %s, want %s", newest.upid, upids[len(upids)-1])
	}
	if s.taskIdx[upids[0]] != nil {
		t.Fatalf("the oldest finished task %s is still in the index", upids[0])
	}
	// The log is contiguous: the finished tasks it keeps are the newest ones.
	for i, tk := range s.tasks[1:] {
		if want := upids[len(upids)-len(s.tasks)+1+i]; tk.upid != want {
			t.Fatalf("log position %d holds %s, want %s", i+1, tk.upid, want)
		}
	}
}
