package e2e

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/pve"
)

// disruptions counts, per guest, the simulator's tasks that stop, shut
// down or reboot it.
func (e *upEnv) disruptions(t *testing.T) map[int]int {
	t.Helper()
	out := map[int]int{}
	for _, tk := range e.simTasks(t) {
		switch tk["type"] {
		case "qmshutdown", "vzshutdown", "qmstop", "vzstop", "qmreboot", "vzreboot":
			id, _ := strconv.Atoi(fmt.Sprint(tk["id"]))
			out[id]++
		}
	}
	return out
}

func (e *upEnv) states(t *testing.T) map[int]string {
	t.Helper()
	out := map[int]string{}
	for _, g := range e.status(t).Guests {
		out[g.VMID] = g.State
	}
	return out
}

func (e *upEnv) cli(t *testing.T, args ...string) string {
	t.Helper()
	out, code := runCLI(t, append(args, "--nats", e.natsURL)...)
	if code != 0 {
		t.Fatalf("converge %v exited %d: %s", args, code, out)
	}
	return out
}

// The safety commands on a real `converge up --sim` process, through the
// CLI: the mass-change guard holds all but five of 40 shutdowns until
// `converge approve --all`; a paused guest is not acted on until resumed;
// a released guest's drift is left alone.
func TestSafetyCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	const n = 40
	e := startUp(t, n+2)
	var ids []int
	for vmid := 100; vmid < 100+n; vmid++ {
		ids = append(ids, vmid)
		e.publish(t, vmid, fmt.Sprintf(`{"vmid":%d,"power":"running"}`, vmid))
	}
	e.wait(t, ids)
	before := e.disruptions(t)

	// 40 running guests all desired stopped: 5 stop (the larger of 10 %
	// of 40 and 5), 35 are held and Proxmox sees nothing for them.
	for _, vmid := range ids {
		e.publish(t, vmid, fmt.Sprintf(`{"vmid":%d,"power":"stopped"}`, vmid))
	}
	var st map[int]string
	eventually(t, time.Minute, "5 guests stopped and 35 held", func() bool {
		st = e.states(t)
		conv, held := 0, 0
		for _, id := range ids {
			switch st[id] {
			case "converged":
				conv++
			case "held":
				held++
			}
		}
		return conv == 5 && held == n-5
	})
	stopped := 0
	for id, k := range e.disruptions(t) {
		if k-before[id] > 0 {
			stopped++
		}
	}
	if stopped != 5 {
		t.Fatalf("%d guests saw a stop or shutdown, want 5", stopped)
	}
	// The holds are journalled: replay, from the journal alone, shows the
	// same 35 guests held for the same reasons as the live views.
	for deadline := time.Now().Add(30 * time.Second); ; {
		live := statusSummaries(t, e.natsURL)
		held, diff := 0, ""
		for _, s := range replayJSON(t, e.natsURL).Guests {
			if s.State != "held" {
				continue
			}
			held++
			if got, want := comparable(s), live[s.VMID]; got != want {
				diff += fmt.Sprintf("guest %d:\n  live   %s\n  replay %s\n", s.VMID, want, got)
			}
		}
		if held == n-5 && diff == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replay shows %d held guests, want %d; differences:\n%s", held, n-5, diff)
		}
		time.Sleep(200 * time.Millisecond) // paces the polling only; the loop waits for a condition
	}
	out, _ := runCLI(t, "status", "--nats", e.natsURL, strconv.Itoa(ids[n-1]))
	if !contains(out, "held", "mass-change guard", "converge approve") {
		t.Fatalf("status of a held guest does not say why:\n%s", out)
	}
	out = e.cli(t, "approve", "--all")
	if !contains(out, "approve all guests: journalled as #") {
		t.Fatalf("approve: %s", out)
	}
	e.wait(t, ids)
	for _, id := range ids {
		if k := e.disruptions(t)[id] - before[id]; k != 1 {
			t.Fatalf("guest %d saw %d stops or shutdowns, want exactly 1", id, k)
		}
	}

	// Pause: a desired change is not acted on; resume acts.
	const paused = 100
	e.cli(t, "pause", strconv.Itoa(paused))
	seq := e.publish(t, paused, fmt.Sprintf(`{"vmid":%d,"power":"running"}`, paused))
	eventually(t, 30*time.Second, "guest 100 paused on its new desired state", func() bool {
		for _, g := range e.status(t, paused).Guests {
			return g.State == "paused" && g.Revision >= seq
		}
		return false
	})
	if g := e.simGuests(t)[paused]; g.Status != "stopped" {
		t.Fatalf("paused guest acted on: %s", g.Status)
	}
	e.cli(t, "resume", strconv.Itoa(paused))
	e.wait(t, []int{paused})
	if g := e.simGuests(t)[paused]; g.Status != "running" {
		t.Fatalf("resumed guest is %s", g.Status)
	}

	// Release: the guest becomes unmanaged and its drift is left alone.
	const released = 101
	e.cli(t, "release", strconv.Itoa(released))
	eventually(t, 30*time.Second, "guest 101 unmanaged", func() bool { return e.states(t)[released] == "unmanaged" })
	g := e.simGuests(t)[released]
	px := e.pveClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := px.Start(ctx, pve.GuestRef{Kind: pve.Kind(g.Kind), Node: g.Node, VMID: released}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the drift of guest 101 observed", func() bool {
		for _, g := range e.status(t, released).Guests {
			return g.Observed != nil && g.Observed.Status == "running"
		}
		return false
	})
	// A full pass replans every guest; another guest's change, planned
	// after it, converging means the released one was planned too.
	e.cli(t, "resync")
	seq = e.publish(t, 102, `{"vmid":102,"power":"running"}`)
	e.wait(t, []int{102})
	if st := e.status(t, 102).Guests[0]; st.Revision < seq {
		t.Fatalf("guest 102 at revision %d, want %d", st.Revision, seq)
	}
	if g := e.simGuests(t)[released]; g.Status != "running" {
		t.Fatalf("released guest's drift undone: %s", g.Status)
	}
	if k := e.disruptions(t)[released] - before[released]; k != 1 {
		t.Fatalf("released guest saw %d stops since, want only the approved one", k)
	}
	// The history says who approved and who released it.
	out = e.cli(t, "history", strconv.Itoa(released))
	if !contains(out, "approved (all guests)", "released: converge leaves the guest alone", "converge-cli") {
		t.Fatalf("history of a released guest:\n%s", out)
	}
	// A held guest's history shows the hold, then the approval that let
	// its shutdown go.
	out = e.cli(t, "history", strconv.Itoa(ids[n-1]))
	if !contains(out, "held shutdown: mass-change guard", "approved (all guests)", "shutdown succeeded") {
		t.Fatalf("history of a held guest:\n%s", out)
	}
}
