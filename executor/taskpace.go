package executor

import (
	"sync"
	"time"

	"github.com/converge-pve/converge/events"
)

// taskPace learns how long each node's tasks of each operation and guest
// kind run, so that waiting on a task polls about once, at its end
// (pve.WaitOptions.Expect), instead of doubling pauses from 20 ms that
// found a 1 s start some 300 ms late after seven polls. Each status poll
// is a request to the node's pvedaemon (a task's status is a protected
// call), and each late one an idle slot of the node's concurrency.
//
// The estimate is kept near the short end of what a task of the kind
// takes: found finished at its first poll, the next wait expects 10 % less
// (it may have ended earlier); found later, it moves half-way to the time
// that took, but at most to twice the estimate, so that one long task (a
// forced shutdown after its timeout) costs the next ones little: back
// under a second within seven tasks. A task longer than expected is
// polled every afterExpectPoll for a while (its length varies: a clone
// waits for its storage's lock), then from Interval again; none waits
// past maxExpect.
//
// A node with no estimate of its own for an operation starts from the
// latest estimate of any node's (nodes differ, but by less than the
// doubling pauses' miss), so an estate's first wave pays the unknown wait
// on the first node to finish only.
type taskPace struct {
	mu  sync.Mutex
	m   map[paceKey]time.Duration
	any map[paceKind]time.Duration // the latest estimate of any node
}

// paceKind is what tasks are told apart by besides their node: the
// operation, and the guest's kind (a container's clone or start is not a
// VM's: one estimate for both is wrong for each, and a first poll past a
// task's end is found late by the whole difference).
type paceKind struct {
	op   events.Op
	kind events.GuestKind
}

type paceKey struct {
	node string
	paceKind
}

// maxExpect bounds the first pause before a task's first poll.
const maxExpect = 10 * time.Second

// afterExpectPoll is the pause between polls of a task found running at
// its expected end, for afterExpect(expected): a clone whose storage lock
// was busy runs a second or more longer, and doubling pauses from 20 ms
// found it up to 640 ms late, on the critical path of a container
// template's clones (converge bench --profile clones: the next clone of
// the template waits for this one's result). A fiftieth of the expected
// length, at least 25 ms: a task's end found within 2 % of its length
// (2.5 % for the shortest), each poll a call of some 20 ms. (At 50 ms, a
// 1 s reboot's end was found some 40 ms late on average, on the critical
// path of each wave of a fleet's reboots: Terraform harness, one node.)
func afterExpectPoll(expected time.Duration) time.Duration {
	return max(expected/50, 25*time.Millisecond)
}

// afterExpectPolls bounds the polls of the window past a task's expected
// end: a task that overruns it (a 60 s backup no more than a 2.5 s clone)
// costs at most this many polls more.
const afterExpectPolls = 25

// afterExpect is how long past a task's expected end it is polled every
// afterExpectPoll: half as long again, or afterExpectPolls polls if that
// is longer, then as any task, so that a task far longer than expected (a
// forced shutdown) is not polled forty times a second to its end.
func afterExpect(expected time.Duration) time.Duration {
	return max(expected/2, afterExpectPolls*afterExpectPoll(expected))
}

func (p *taskPace) expect(node string, k paceKind) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.m[paceKey{node, k}]; ok {
		return e
	}
	return p.any[k]
}

// observe records a wait that expected expected and found the task ended
// after took, at its polls-th poll.
func (p *taskPace) observe(node string, k paceKind, expected, took time.Duration, polls int) {
	if polls < 1 || took < 0 {
		return
	}
	var e time.Duration
	switch {
	case expected <= 0:
		// Doubling pauses: the task ended within the last, about the
		// second half of the wait.
		e = took / 2
	case polls == 1:
		e = expected * 9 / 10
	default:
		// At most twice the estimate: one long task (a forced shutdown)
		// must not make the next ones wait long for their first poll.
		e = min(expected+(took-expected)/2, 2*expected)
	}
	e = min(max(e, 0), maxExpect)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m, p.any = map[paceKey]time.Duration{}, map[paceKind]time.Duration{}
	}
	p.m[paceKey{node, k}], p.any[k] = e, e
}
