package pvesim

import "fmt"

// FinishTask ends a running task now, as if its latency had passed: its
// work runs and takes effect. Tests use it to look at a guest while a task
// runs (with a long Faults.TaskLatency) and then end the task
// deterministically.
func (s *Sim) FinishTask(upid string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.taskIdx[upid]
	if t == nil {
		return fmt.Errorf("pvesim: no task %s", upid)
	}
	if t.timer != nil {
		t.timer.Stop()
	}
	s.finish(t)
	return nil
}
