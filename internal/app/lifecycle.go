package app

import (
	"github.com/nats-io/nats-server/v2/server"

	"github.com/converge-pve/converge/executor"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/observer"
	"github.com/converge-pve/converge/internal/planloop"
)

// Stop asks every role to stop; Wait waits for them.
func (a *App) Stop() { a.cancel() }

// StopRole stops one role ("observer", "planner", "executor-0", "http",
// "control") and waits for it; the others go on. The bench stops the
// observer to drive its passes itself.
func (a *App) StopRole(name string) {
	if r := a.roles[name]; r != nil {
		r.cancel()
		<-r.done
	}
}

// Wait waits until every role has stopped, closes the connections and the
// embedded server, and returns the first role's failure.
func (a *App) Wait() error {
	a.wg.Wait()
	a.cancel()
	a.close()
	a.errMu.Lock()
	defer a.errMu.Unlock()
	return a.err
}

// close closes the connections, then the embedded server (roles stop
// before the server does: otherwise every consumer logs its shutdown).
func (a *App) close() {
	for _, b := range a.buss {
		b.Close()
	}
	if a.b != nil {
		a.b.Close()
	}
	if a.srv != nil {
		a.srv.Shutdown()
		a.srv.WaitForShutdown()
	}
}

// Bus is the process's main connection.
func (a *App) Bus() *bus.Bus { return a.b }

// Observer is the observer role, nil if not run.
func (a *App) Observer() *observer.Observer { return a.obs }

// Planner is the planner role, nil if not run.
func (a *App) Planner() *planloop.Loop { return a.plan }

// Executors are the executor instances.
func (a *App) Executors() []*executor.Executor { return a.execs }

// Server is the embedded NATS server, nil when converge connects to
// another.
func (a *App) Server() *server.Server { return a.srv }
