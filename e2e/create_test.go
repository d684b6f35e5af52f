package e2e

import (
	"context"
	"fmt"
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

// createGuests is how many guests TestCreateSurvivesSIGKILL creates: the
// issue's 200, a quarter of each kind of clone.
const createGuests = 200

// TestCreateSurvivesSIGKILL: 200 guests (QEMU and LXC, linked and full)
// created from templates on three nodes under the creation limits (scaled
// down: VM clones two at a time per storage, whose lock the simulator
// holds 50 ms per volume and fails after 10 s; containers' templates one
// clone at a time; 20 clones a second), by two executor processes, one SIGKILLed while its
// clones run. Afterwards every guest exists exactly once, converge's; the
// simulator's task list holds exactly one clone per guest and no failed
// clone; all converge, and the journal audit holds.
func TestCreateSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	start := time.Now()
	phase := func(name string) { t.Logf("%6.2fs %s", time.Since(start).Seconds(), name) }
	srv, err := natsserver.Start(natsserver.Options{DataDir: t.TempDir(), Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	// Tasks last long enough for a kill to land mid-clone; every clone
	// takes its storage's lock for 50 ms (a waiter fails after 10 s, as on
	// Proxmox): the limits must keep the line short enough.
	sim, err := pvesim.New(pvesim.Options{Nodes: 3, Tokens: map[string]string{"root@pam!create": "create-secret"},
		Faults: pvesim.Faults{TaskLatency: pvesim.Duration(250 * time.Millisecond), StorageLockHold: pvesim.Duration(50 * time.Millisecond)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	// A VM and a container template on each node.
	templates := map[string][2]int{}
	for i, node := range sim.NodeNames() {
		vm, ct := 9000+10*i, 9001+10*i
		templates[node] = [2]int{vm, ct}
		if err := sim.AddGuest(pvesim.GuestSpec{VMID: vm, Node: node, Template: true, Name: "tpl-vm-" + node}); err != nil {
			t.Fatal(err)
		}
		if err := sim.AddGuest(pvesim.GuestSpec{VMID: ct, Kind: pvesim.LXC, Node: node, Template: true, Name: "tpl-ct-" + node}); err != nil {
			t.Fatal(err)
		}
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	natsURL := srv.ClientURL()
	pveArgs := []string{"--pve-url", sim.URL(), "--pve-token-id", "root@pam!create", "--pve-token-secret", "create-secret"}
	startProc(t, "observer", append([]string{"observer", "--nats", natsURL, "--observe-interval", "300ms"}, pveArgs...)...)
	startProc(t, "planner", "planner", "--nats", natsURL, "--observe-interval", "1s",
		"--clone-concurrency", "2", "--create-rate", "1200")
	execArgs := func(name string) []string {
		return append([]string{"executor", "--nats", natsURL, "--name", name, "--lease-ttl", "2s", "--ack-wait", "3s"}, pveArgs...)
	}
	e1 := startProc(t, "e1", execArgs("e1")...)
	startProc(t, "e2", execArgs("e2")...)
	eventually(t, 60*time.Second, "both executors owning partitions", func() bool {
		s := shares((&scaleEnv{js: js}).leaseOwners(t, "executor-pve"))
		return s["executor_e1"] > 0 && s["executor_e2"] > 0 && s["executor_e1"]+s["executor_e2"] == 16
	})
	phase("roles ready")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var ids []int
	nodes := sim.NodeNames()
	for i := range createGuests {
		id := 1000 + i
		ids = append(ids, id)
		tpl := templates[nodes[i%len(nodes)]]
		var body string
		switch i % 4 {
		case 0: // a VM, linked
			body = fmt.Sprintf(`{"vmid":%d,"power":"running","cores":2,"clone":{"from":%d}}`, id, tpl[0])
		case 1: // a VM, full, on the shared storage
			body = fmt.Sprintf(`{"vmid":%d,"power":"stopped","memory_mib":1024,"clone":{"from":%d,"full":true,"storage":"ceph"}}`, id, tpl[0])
		case 2: // a container, linked
			body = fmt.Sprintf(`{"vmid":%d,"power":"running","clone":{"from":%d}}`, id, tpl[1])
		default: // a container, full, on the shared storage
			body = fmt.Sprintf(`{"vmid":%d,"tags":["full"],"clone":{"from":%d,"full":true,"storage":"ceph"}}`, id, tpl[1])
		}
		if _, err := js.Publish(ctx, events.Subject(events.KindDesired, "pve", id), []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	phase(fmt.Sprintf("%d desired events published", len(ids)))

	// Kill e1 once it has clones running: started and journalled, not ended.
	eventually(t, 90*time.Second, "e1 with clones running", func() bool {
		started, finished := map[string]bool{}, map[string]bool{}
		for _, en := range readJournal(t, js) {
			if en.info.Kind != events.KindResult {
				continue
			}
			r, _ := events.Decode[events.Result](en.data)
			if r.Op != events.OpClone || r.Executor != "executor@e1" {
				continue
			}
			if r.Status == events.ResultStarted {
				started[r.ActionID] = true
			} else {
				finished[r.ActionID] = true
			}
		}
		running := 0
		for id := range started {
			if !finished[id] {
				running++
			}
		}
		return running >= 2
	})
	e1.kill()
	phase("e1 SIGKILLed with clones running")

	args := []string{"wait", "--nats", natsURL, "--timeout", "4m"}
	for _, id := range ids {
		args = append(args, strconv.Itoa(id))
	}
	if out, code := runCLI(t, args...); code != 0 {
		t.Fatalf("converge wait exited %d: %s", code, tail(out, 3000))
	}
	phase("all converged")

	// Every guest exists exactly once, and is converge's.
	made := 0
	for _, g := range sim.Guests() {
		if g.Template {
			continue
		}
		made++
		if g.VMID < 1000 || g.VMID >= 1000+createGuests || !strings.Contains(g.Config["tags"], events.OwnerTag) {
			t.Errorf("guest %d: not one of the desired, or not marked converge's: %+v", g.VMID, g.Config)
		}
	}
	if made != createGuests {
		t.Fatalf("%d guests exist, want %d", made, createGuests)
	}
	// One clone task per guest, none failed.
	clones := map[int]int{}
	for _, tk := range sim.Tasks() {
		if tk.Type != "qmclone" && tk.Type != "vzclone" {
			continue
		}
		if tk.ExitStatus != "OK" {
			t.Errorf("clone task %s ended %q", tk.UPID, tk.ExitStatus)
		}
		var newid int
		for _, l := range tk.Log {
			if _, after, ok := strings.Cut(l, " with ID "); ok {
				newid, _ = strconv.Atoi(strings.TrimSpace(after))
			}
		}
		clones[newid]++
	}
	for _, id := range ids {
		if clones[id] != 1 {
			t.Errorf("guest %d: %d clone tasks, want exactly 1", id, clones[id])
		}
	}
	if len(clones) != createGuests {
		t.Errorf("clone tasks for %d guests, want %d: %v", len(clones), createGuests, clones)
	}
	_, actions := auditJournal(t, js)
	t.Logf("%d guests created and converged, %d actions, one clone each, none failed", createGuests, actions)
}

// TestUpCreatesAndExplains is the issue's walkthrough on `converge up
// --sim`: `desire 501 --clone-from 9000 --power running` creates the guest
// and `wait` returns once it runs; a guest that cannot be created (no
// clone, or a template that does not exist) makes `wait` fail at once with
// the reason, not at its timeout.
func TestUpCreatesAndExplains(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	e := startUp(t, 4)
	if out, code := runCLI(t, "desire", "501", "--nats", e.natsURL, "--clone-from", "9000", "--power", "running", "--cores", "2"); code != 0 {
		t.Fatalf("desire: %d %s", code, out)
	}
	e.wait(t, []int{501})
	if g := e.simGuests(t)[501]; g.Status != "running" || g.Config["cores"] != "2" || !strings.Contains(g.Config["tags"], events.OwnerTag) {
		t.Fatalf("guest 501: %+v", g)
	}
	for vmid, args := range map[int][]string{
		502: {"--power", "running"},
		503: {"--power", "running", "--clone-from", "9999"},
	} {
		if out, code := runCLI(t, append([]string{"desire", strconv.Itoa(vmid), "--nats", e.natsURL}, args...)...); code != 0 {
			t.Fatalf("desire %d: %d %s", vmid, code, out)
		}
		began := time.Now()
		out, code := runCLI(t, "wait", strconv.Itoa(vmid), "--nats", e.natsURL, "--timeout", "2m")
		took := time.Since(began)
		if code != 4 || !contains(out, fmt.Sprintf("guest %d is error", vmid), "does not exist in Proxmox") {
			t.Fatalf("wait %d: exit %d after %s\n%s", vmid, code, took, out)
		}
		t.Logf("wait %d failed after %s: %s", vmid, took.Round(10*time.Millisecond), strings.TrimSpace(out))
		if took > time.Minute {
			t.Fatalf("wait %d took %s: not failing fast", vmid, took)
		}
	}
}
