package pvesim

import (
	"net/http"
)

// CompleteRunningTasks ends every running task now, as if its latency had
// passed, and returns how many it ended. With a long task latency this lets
// a test hold tasks running for as long as it needs (to kill a client
// mid-task, say) and then let them finish, without timing assumptions.
func (s *Sim) CompleteRunningTasks() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, t := range s.tasks {
		if t.running {
			if t.timer != nil {
				t.timer.Stop()
			}
			s.finish(t)
			n++
		}
	}
	return n
}

func (s *Sim) releaseRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /_sim/tasks/complete", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]int{"completed": s.CompleteRunningTasks()})
	})
}
