package e2e

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/natsserver"
	"github.com/converge-pve/converge/internal/pvesim"
)

func simControl(t *testing.T, e *upEnv, path string) {
	t.Helper()
	res, err := http.Post(e.simURL+"/_sim/"+path, "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("sim control %s: %s", path, res.Status)
	}
}

// TestUnreachableBlocksThenConverges is invariant 6: while Proxmox is
// unreachable nothing is planned (status blocked, never "gone"); once it is
// back the guest converges.
func TestUnreachableBlocksThenConverges(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	e := startUp(t, 4)
	simControl(t, e, "unreachable?for=1h")
	eventually(t, 60*time.Second, "the planner to see Proxmox unreachable", func() bool {
		st := e.status(t)
		return st.Planner != nil && !st.Planner.State.Reachable
	})
	seq := e.publish(t, 101, `{"vmid":101,"power":"running","cores":2}`)
	eventually(t, 60*time.Second, "guest 101 blocked at the new revision", func() bool {
		st := e.status(t, 101)
		if len(st.Guests) != 1 {
			return false
		}
		g := st.Guests[0]
		return g.Revision == seq && g.State == "blocked" && strings.Contains(g.Reason, "unreachable")
	})
	// The other guests are blocked too, and none is reported gone.
	for _, g := range e.status(t).Guests {
		if g.Observed != nil && g.State != "blocked" && g.State != "unmanaged" {
			t.Fatalf("guest %d is %s while Proxmox is unreachable", g.VMID, g.State)
		}
	}
	for _, en := range readJournal(t, e.js) {
		if en.info.Kind == events.KindObserved {
			o, _ := events.Decode[events.Observed](en.data)
			if !o.Exists {
				t.Fatalf("guest %d reported gone during the outage", o.VMID)
			}
		}
		if en.info.Kind == events.KindAction {
			t.Fatalf("an action was planned while Proxmox was unreachable: seq %d", en.seq)
		}
	}
	simControl(t, e, "unreachable?for=0s")
	e.wait(t, []int{101})
	if g := e.simGuests(t)[101]; g.Status != "running" || g.Config["cores"] != "2" {
		t.Fatalf("after the outage: %+v", g)
	}
	auditJournal(t, e.js)
}

// TestExecutorKilledMidTask is invariant 3 with real processes: observer,
// planner and executor run as separate `converge` processes; the executor
// is SIGKILLed while its Proxmox tasks run. A new executor resumes the
// journalled tasks: nothing is lost and no mutation is issued twice
// (checked in the simulator's /cluster/tasks and in the journal).
func TestExecutorKilledMidTask(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	srv, err := natsserver.Start(natsserver.Options{DataDir: t.TempDir(), Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	// Tasks run until the test lets them finish: the kill is mid-task by
	// construction, not by timing.
	sim, err := pvesim.New(pvesim.Options{Guests: 6, Tokens: map[string]string{"root@pam!kill": "kill-secret"},
		Faults: pvesim.Faults{TaskLatency: pvesim.Duration(time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	natsURL := srv.ClientURL()
	pveArgs := []string{"--pve-url", sim.URL(), "--pve-token-id", "root@pam!kill", "--pve-token-secret", "kill-secret"}
	startProc(t, "observer", append([]string{"observer", "--nats", natsURL, "--observe-interval", "200ms"}, pveArgs...)...)
	startProc(t, "planner", "planner", "--nats", natsURL, "--observe-interval", "500ms")
	ex1 := startProc(t, "executor1", append([]string{"executor", "--nats", natsURL, "--ack-wait", "30s"}, pveArgs...)...)

	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	guests := []int{101, 103, 105} // stopped demo guests (105 is a container)
	for _, id := range guests {
		if _, err := js.Publish(ctx, events.Subject(events.KindDesired, "pve", id), []byte(`{"vmid":`+strconv.Itoa(id)+`,"power":"running"}`)); err != nil {
			t.Fatal(err)
		}
	}
	started := map[int]string{}
	eventually(t, 60*time.Second, "all three start tasks journalled", func() bool {
		for _, en := range readJournal(t, js) {
			if en.info.Kind == events.KindResult {
				if r, _ := events.Decode[events.Result](en.data); r.Status == events.ResultStarted {
					started[r.VMID] = r.UPID
				}
			}
		}
		return len(started) == len(guests)
	})
	ex1.kill()
	if n := sim.CompleteRunningTasks(); n != len(guests) {
		t.Fatalf("%d tasks were running at the kill, want %d", n, len(guests))
	}
	startProc(t, "executor2", append([]string{"executor", "--nats", natsURL, "--ack-wait", "1s"}, pveArgs...)...)
	args := []string{"wait", "--nats", natsURL, "--timeout", "90s"}
	for _, id := range guests {
		args = append(args, strconv.Itoa(id))
	}
	if out, code := runCLI(t, args...); code != 0 {
		t.Fatalf("converge wait exited %d: %s", code, out)
	}
	// One Proxmox task per action: the resumed executor waited on the
	// journalled task instead of starting the guest again.
	perGuest := map[string]int{}
	for _, task := range sim.Tasks() {
		if task.Type == "qmstart" || task.Type == "vzstart" {
			perGuest[task.ID]++
		}
	}
	for _, id := range guests {
		if n := perGuest[strconv.Itoa(id)]; n != 1 {
			t.Fatalf("guest %d got %d start tasks, want exactly 1", id, n)
		}
	}
	auditJournal(t, js)
	for _, en := range readJournal(t, js) {
		if en.info.Kind != events.KindResult {
			continue
		}
		r, _ := events.Decode[events.Result](en.data)
		if r.Status.Final() && r.UPID != started[r.VMID] {
			t.Fatalf("guest %d finished on task %q, journalled %q", r.VMID, r.UPID, started[r.VMID])
		}
	}
}
