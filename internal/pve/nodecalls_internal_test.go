package pve

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

func TestNodeOfPath(t *testing.T) {
	for path, want := range map[string]string{
		"/api2/json/nodes/pve1/qemu/101/config": "pve1",
		"/api2/json/nodes/pve2":                 "pve2",
		"/api2/json/cluster/resources":          "",
		"/api2/json/version":                    "",
		"/proxy/api2/json/nodes/pve3/tasks/x":   "pve3",
	} {
		if got := nodeOfPath(path); got != want {
			t.Errorf("nodeOfPath(%q) = %q, want %q", path, got, want)
		}
	}
}

const (
	cfg101  = "/api2/json/nodes/pve1/qemu/101/config"
	boot102 = "/api2/json/nodes/pve1/qemu/102/status/reboot"
)

// cancelled is a context whose Done is ready: a full pool's line is not,
// so acquire can only fail with it, whatever select picks.
func cancelled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// A node's writes beyond its slots wait, and while a task runs there they
// hold one slot less than the node has: the last is kept for the short
// calls (a task's start, its polls, a guest's status). Its reads, other
// nodes' calls and the cluster-wide paths do not wait for them; a freed
// slot lets the next one in.
func TestNodeSlotsBoundCallsPerNode(t *testing.T) {
	s := newNodeSlots(DefaultNodeCalls)
	ctx := context.Background()
	defer s.waitingOn("pve1")()
	var held []func()
	for range DefaultNodeCalls - 1 {
		r, err := s.acquire(ctx, "PUT", cfg101)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, r)
	}
	if _, err := s.acquire(cancelled(), "PUT", cfg101); !errors.Is(err, context.Canceled) {
		t.Fatalf("a 3rd write to pve1 got the slot kept for short calls (err %v); want it to wait", err)
	}
	boot, err := s.acquire(cancelled(), "POST", boot102)
	if err != nil {
		t.Fatalf("a reboot waited behind 2 writes with a slot free: %v", err)
	}
	for _, c := range [][2]string{{"GET", cfg101}, {"GET", "/api2/json/nodes/pve1/qemu/101/pending"}, {"PUT", "/api2/json/nodes/pve2/qemu/201/config"}, {"GET", "/api2/json/cluster/resources"}} {
		r, err := s.acquire(cancelled(), c[0], c[1])
		if err != nil {
			t.Fatalf("%s %s waited for pve1's write slots: %v", c[0], c[1], err)
		}
		r()
	}
	// pvedaemon's reads (a guest's status, a task's) wait with the writes.
	for _, p := range []string{"/api2/json/nodes/pve1/qemu/101/status/current", "/api2/json/nodes/pve1/tasks/UPID:pve1:1/status"} {
		if _, err := s.acquire(cancelled(), "GET", p); !errors.Is(err, context.Canceled) {
			t.Fatalf("GET %s did not wait for pve1's pvedaemon slots (err %v)", p, err)
		}
	}
	boot()
	if _, err := s.acquire(cancelled(), "PUT", cfg101); !errors.Is(err, context.Canceled) {
		t.Fatalf("a 3rd write got the short calls' slot once it was free (err %v)", err)
	}
	held[0]()
	r, err := s.acquire(cancelled(), "PUT", cfg101)
	if err != nil {
		t.Fatalf("the freed slot was not free: %v", err)
	}
	r()
	if newNodeSlots(0) != nil {
		t.Fatal("NodeCalls 0 must be no limit")
	}
	if r, err := (*nodeSlots)(nil).acquire(cancelled(), "PUT", cfg101); err != nil {
		t.Fatalf("no limit waited: %v", err)
	} else {
		r()
	}
}

// A task start waiting for a node's write slot goes ahead of the config
// writes waiting before it; a waiter that gives up leaves its place to
// the next without losing a slot.
func TestNodeSlotsTaskStartsFirst(t *testing.T) {
	s := newNodeSlots(1)
	ctx := context.Background()
	r, err := s.acquire(ctx, "PUT", cfg101)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		served []string
		wg     sync.WaitGroup
	)
	wait := func(method, path, name string) {
		defer wg.Done()
		rel, err := s.acquire(ctx, method, path)
		if err != nil {
			name = "error " + err.Error()
		}
		mu.Lock()
		served = append(served, name)
		mu.Unlock()
		if err == nil {
			rel()
		}
	}
	queued := func(first, rest int) {
		t.Helper()
		for {
			s.mu.Lock()
			p := s.by[slotKey{"pve1", true}]
			f, n := len(p.lines[lineStart])+len(p.lines[lineAhead]), len(p.lines[lineRest])
			s.mu.Unlock()
			if f+n == first+rest {
				if f != first {
					t.Fatalf("%d task starts and %d others waiting, want %d and %d", f, n, first, rest)
				}
				return
			}
			mu.Lock()
			early := len(served)
			mu.Unlock()
			if early > 0 {
				t.Fatalf("%v went while the slot was held", served)
			}
		}
	}
	wg.Add(1)
	go wait("PUT", cfg101, "write")
	queued(0, 1)
	// One that gives up: its place goes, the slot stays.
	gone, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { _, err := s.acquire(gone, "PUT", cfg101); errc <- err }()
	queued(0, 2)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled waiter: %v", err)
	}
	queued(0, 1)
	// A write a task waits on (its guest's reboot) goes ahead of the
	// other writes, and a task start ahead of it, though it came later.
	aheadWait := func() {
		defer wg.Done()
		rel, err := s.acquire(Ahead(ctx), "PUT", "/api2/json/nodes/pve1/qemu/103/config")
		mu.Lock()
		served = append(served, "leading write")
		mu.Unlock()
		if err == nil {
			rel()
		}
	}
	wg.Add(3) // the leading write, the reboot and the poll
	go aheadWait()
	queued(1, 1)
	go wait("POST", boot102, "reboot")
	queued(2, 1)
	go wait("GET", "/api2/json/nodes/pve1/tasks/UPID:pve1:1/status", "poll")
	queued(3, 1)
	r()
	wg.Wait()
	if len(served) != 4 || served[0] != "reboot" || served[1] != "poll" || served[2] != "leading write" || served[3] != "write" {
		t.Fatalf("served %v, want the reboot and the poll, then the leading write, then the other write", served)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.by[slotKey{"pve1", true}]; p.free != 1 {
		t.Fatalf("%d slots free after all were given back, want 1", p.free)
	}
}

func TestNodeCallsValidated(t *testing.T) {
	c := DefaultConfig()
	c.URL, c.TokenID, c.TokenSecret = "https://pve1:8006", "root@pam!x", "s"
	if c.NodeCalls != DefaultNodeCalls {
		t.Fatalf("default NodeCalls %d, want %d", c.NodeCalls, DefaultNodeCalls)
	}
	c.NodeCalls = -1
	if _, err := c.checked(); err == nil {
		t.Fatal("NodeCalls -1 accepted")
	}
}

// A write of a later line that has waited agingBound goes ahead of the
// first line, so that a steady stream of polls never starves it.
func TestNodeSlotsAging(t *testing.T) {
	s := newNodeSlots(1)
	now := time.Unix(0, 0)
	var nowMu sync.Mutex
	s.now = func() time.Time { nowMu.Lock(); defer nowMu.Unlock(); return now }
	ctx := context.Background()
	r, err := s.acquire(ctx, "GET", "/nodes/pve1/tasks/U/status")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 2)
	go func() {
		rel, err := s.acquire(ctx, "PUT", cfg101)
		if err == nil {
			got <- "write"
			rel()
		}
	}()
	waitLines := func(start, rest int) { waitPve1Lines(s, start, rest) }
	waitLines(0, 1)
	nowMu.Lock()
	now = now.Add(agingBound)
	nowMu.Unlock()
	go func() {
		rel, err := s.acquire(ctx, "GET", "/nodes/pve1/tasks/V/status")
		if err == nil {
			got <- "poll"
			rel()
		}
	}()
	waitLines(1, 1)
	r()
	if first := <-got; first != "write" {
		t.Fatalf("%s served first; the write had waited %s", first, agingBound)
	}
	<-got
}

// testClient is a Client of srv with one slot per node and a short
// request timeout.
func testClient(t *testing.T, srv *httptest.Server) *Client {
	t.Helper()
	c, err := New(Config{URL: srv.URL, TokenID: "root@pam!t", TokenSecret: "s", Timeout: 200 * time.Millisecond, NodeCalls: 1})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The wait for a node's slot is not the request's time: a call that waits
// longer than the request timeout for its slot is still sent; one whose
// context ends while it waits was never sent and says so (not an unknown
// outcome); a mutation whose gate closed while it waited is not sent.
func TestNodeSlotWaitIsNotTheRequest(t *testing.T) {
	var mu sync.Mutex
	received := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		received++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"data":"UPID:pve1:00000001:00000001:00000001:qmstart:101:root@pam:"}`))
	}))
	defer srv.Close()
	c := testClient(t, srv)
	ref := GuestRef{Kind: KindQEMU, Node: "pve1", VMID: 101}
	count := func() int { mu.Lock(); defer mu.Unlock(); return received }

	// Waited out its context: not sent, not indeterminate.
	hold, err := c.wire.slots.acquire(context.Background(), "POST", "/nodes/pve1/qemu/101/status/start")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = c.Start(ctx, ref)
	var pe *Error
	if !errors.As(err, &pe) || pe.Indeterminate || count() != 0 {
		t.Fatalf("a start that never left its slot's line: %v (indeterminate %v), %d requests", err, pe != nil && pe.Indeterminate, count())
	}

	// Waits longer than the request timeout, then is sent and succeeds.
	done := make(chan error, 1)
	go func() { _, err := c.Start(context.Background(), ref); done <- err }()
	for {
		c.wire.slots.mu.Lock()
		n := len(c.wire.slots.by[slotKey{"pve1", true}].lines[lineStart])
		c.wire.slots.mu.Unlock()
		if n == 1 {
			break
		}
	}
	time.Sleep(300 * time.Millisecond) // longer than the 200 ms request timeout: the wait must not count
	hold()
	if err := <-done; err != nil || count() != 1 {
		t.Fatalf("a start that waited for its slot: %v, %d requests", err, count())
	}

	// A closed gate: not sent.
	_, err = c.Start(WithGate(context.Background(), func() bool { return false }), ref)
	if !errors.Is(err, ErrGateClosed) || !errors.As(err, &pe) || pe.Indeterminate || count() != 1 {
		t.Fatalf("a start behind a closed gate: %v, %d requests", err, count())
	}
	// Reads pass a closed gate.
	if _, err := c.GuestStatus(WithGate(context.Background(), func() bool { return false }), ref); count() != 2 {
		t.Fatalf("a read behind a closed gate was not sent: %v", err)
	}
}

// While a task runs on the node, a slot freed while the long calls hold
// all theirs goes to a short call, never to a waiting write; a write's
// freed slot goes to the next write. With no task to wait on, the writes
// take every slot.
func TestNodeSlotsKeepOneForShortCalls(t *testing.T) {
	s := newNodeSlots(3)
	ctx := context.Background()
	taskDone := s.waitingOn("pve1")
	acq := func(method, path string) func() {
		t.Helper()
		r, err := s.acquire(ctx, method, path)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	w1, _ := acq("PUT", cfg101), acq("PUT", cfg101)
	poll := acq("GET", "/api2/json/nodes/pve1/tasks/U/status")
	got := make(chan string, 2)
	waitFor := func(name, method, path string) {
		go func() {
			if _, err := s.acquire(ctx, method, path); err == nil {
				got <- name
			}
		}()
	}
	lines := func(start, rest int) { waitPve1Lines(s, start, rest) }
	waitFor("write", "PUT", cfg101)
	lines(0, 1)
	poll() // the short calls' slot: free, and not for the write
	waitFor("start", "POST", boot102)
	if first := <-got; first != "start" {
		t.Fatalf("%s took the slot kept for short calls", first)
	}
	lines(0, 1)
	w1()
	if next := <-got; next != "write" {
		t.Fatalf("%s took a write's freed slot, want the waiting write", next)
	}
	taskDone()

	// No task to wait on: the writes take every slot.
	idle := newNodeSlots(3)
	for range 3 {
		if _, err := idle.acquire(cancelled(), "PUT", cfg101); err != nil {
			t.Fatalf("with no task running, a write waited for the kept slot: %v", err)
		}
	}
	// A write waiting for the kept slot gets it when the node's last task
	// ends.
	s = newNodeSlots(3)
	taskDone = s.waitingOn("pve1")
	acq("PUT", cfg101)
	acq("PUT", cfg101)
	waitFor("write 3", "PUT", cfg101)
	lines(0, 1)
	taskDone()
	if name := <-got; name != "write 3" {
		t.Fatalf("got %s", name)
	}
}

// waitPve1Lines waits until start calls wait in pve1's pvedaemon first
// line and rest in its last.
func waitPve1Lines(s *nodeSlots, start, rest int) {
	for {
		s.mu.Lock()
		p := s.by[slotKey{"pve1", true}]
		a, b := len(p.lines[lineStart]), len(p.lines[lineRest])
		s.mu.Unlock()
		if a == start && b == rest {
			return
		}
	}
}

// When a write a task waits on (Ahead) ends with no task running, its
// slot is held for the short calls that follow it (its read-back, its
// task's start), not given to the next write: until a task starts, or for
// holdFor. Before, every write may take a slot, as with no task running;
// while a task runs, the long calls' cap keeps a slot and no hold is
// made.
func TestNodeSlotsAheadWriteHoldsItsSlot(t *testing.T) {
	s := newNodeSlots(3)
	now := time.Unix(1_700_000_000, 0)
	var clockMu sync.Mutex
	s.now = func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return now }
	var lapses []func()
	s.after = func(d time.Duration, f func()) {
		if d != holdFor {
			t.Errorf("hold lapses after %s, want %s", d, holdFor)
		}
		lapses = append(lapses, f)
	}
	acq := func(ctx context.Context, method, path string) func() {
		t.Helper()
		r, err := s.acquire(ctx, method, path)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	got := make(chan string, 1)
	waitFor := func(name string) {
		go func() {
			if _, err := s.acquire(context.Background(), "PUT", cfg101); err == nil {
				got <- name
			}
		}()
		waitingNotGranted(t, s, got)
	}
	lead := Ahead(context.Background())
	// A fleet change's first writes take every slot.
	w1, w2 := acq(lead, "PUT", cfg101), acq(lead, "PUT", cfg101)
	acq(context.Background(), "PUT", cfg101)
	waitFor("write 4")
	// The first ends: its slot waits for its read-back and its start.
	w1()
	waitingNotGranted(t, s, got)
	acq(context.Background(), "GET", "/api2/json/nodes/pve1/qemu/101/status/current")()
	waitingNotGranted(t, s, got)
	acq(context.Background(), "POST", boot102)() // its task starts: the hold ends
	if name := <-got; name != "write 4" {
		t.Fatalf("got %s", name)
	}
	// The second ends and no task follows: the hold lapses after holdFor.
	w2()
	waitFor("write 5")
	clockMu.Lock()
	now = now.Add(holdFor)
	clockMu.Unlock()
	if len(lapses) != 2 {
		t.Fatalf("%d lapses scheduled, want one per Ahead write ended", len(lapses))
	}
	lapses[1]()
	if name := <-got; name != "write 5" {
		t.Fatalf("got %s", name)
	}

	// The next writes a task waits on may take all but one of the held
	// slots: their tasks are as near.
	s = newNodeSlots(3)
	s.after = func(time.Duration, func()) {}
	a1, a2 := acq(lead, "PUT", cfg101), acq(lead, "PUT", cfg101)
	acq(lead, "PUT", cfg101)
	a1()
	a2() // two held, two free
	acq(lead, "PUT", cfg101)
	if _, err := s.acquire(cancelled(), "PUT", cfg101); err == nil {
		t.Fatal("a write nothing waits on took a held slot")
	}
	if _, err := s.acquire(Ahead(cancelled()), "PUT", cfg101); err == nil {
		t.Fatal("an Ahead write took the last held slot")
	}

	// While a task runs, an Ahead write's end holds nothing.
	s = newNodeSlots(3)
	s.after = func(time.Duration, func()) { t.Error("an Ahead write ended while a task ran holds its slot") }
	taskDone := s.waitingOn("pve1")
	defer taskDone()
	acq(lead, "PUT", cfg101)()
	if n := len(s.by[slotKey{"pve1", true}].held); n != 0 {
		t.Fatalf("%d holds", n)
	}
}

// waitingNotGranted waits until a write waits in pve1's last line; it
// fails if got reports one granted first.
func waitingNotGranted(t *testing.T, s *nodeSlots, got <-chan string) {
	t.Helper()
	for {
		select {
		case name := <-got:
			t.Fatalf("%s took the slot held for the short calls", name)
		default:
		}
		s.mu.Lock()
		n := len(s.by[slotKey{"pve1", true}].lines[lineRest])
		s.mu.Unlock()
		if n == 1 {
			return
		}
	}
}
