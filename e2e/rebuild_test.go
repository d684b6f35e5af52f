package e2e

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/pvesim"
)

// TestRebuildAndRestart: projections are dropped (`converge rebuild`)
// while converge runs, and rewritten from the fold; converge is then
// SIGKILLed before it checkpoints again and restarted on the same data: it
// folds the journal from the start, its views are complete, and it
// converges new changes with no action planned twice or for guests that
// did not change. A clean stop writes a checkpoint, and the next start
// resumes from it.
func TestRebuildAndRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	sim, err := pvesim.New(pvesim.Options{Guests: 8, Tokens: map[string]string{"root@pam!rb": "rb-secret"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	data := t.TempDir()
	t.Setenv("CONVERGE_DATA", data) // the CLI and natsConnect find up's NATS credentials there
	// Each start on addresses of its own: a restart never counts on
	// getting back a port its predecessor released.
	var natsURL string
	up := func(name string) *proc {
		natsAddr, httpAddr := freeAddr(t), freeAddr(t)
		natsURL = "nats://" + natsAddr
		// One checkpoint (right after the first fold), then none until
		// shutdown: the crash below happens with none stored.
		p := startProc(t, name, "up", "--checkpoint-interval", "1h", "--data", data, "--nats-listen", natsAddr, "--http", httpAddr,
			"--pve-url", sim.URL(), "--pve-token-id", "root@pam!rb", "--pve-token-secret", "rb-secret",
			"--observe-interval", "200ms")
		p.ready(t, 90*time.Second, "http://"+httpAddr+"/readyz")
		return p
	}
	var guests []int
	for _, g := range sim.Guests() {
		if !g.Template {
			guests = append(guests, g.VMID)
		}
	}
	desire := func(js jetstream.JetStream, rev int) {
		t.Helper()
		for _, id := range guests {
			body := `{"vmid":` + strconv.Itoa(id) + `,"description":"revision ` + strconv.Itoa(rev) + `"}`
			if _, err := js.Publish(t.Context(), events.Subject(events.KindDesired, "pve", id), []byte(body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	wait := func(ids ...int) {
		t.Helper()
		args := []string{"wait", "--nats", natsURL, "--timeout", "2m"}
		for _, id := range ids {
			args = append(args, strconv.Itoa(id))
		}
		if out, code := runCLI(t, args...); code != 0 {
			t.Fatalf("converge wait exited %d: %s", code, tail(out, 2000))
		}
	}
	connect := func() jetstream.JetStream {
		nc, err := natsConnect(t, natsURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, _ := jetstream.New(nc)
		return js
	}
	actionsOf := func(js jetstream.JetStream) map[int]int {
		n := map[int]int{}
		for _, en := range readJournal(t, js) {
			if en.info.Kind == events.KindAction {
				n[en.info.VMID]++
			}
		}
		return n
	}

	up1 := up("up1")
	js := connect()
	desire(js, 2)
	wait(guests...)

	// Drop the projections while converge runs.
	out, code := runCLI(t, "rebuild", "--nats", natsURL, "--wait", "60s", "-o", "json")
	if code != 0 {
		t.Fatalf("rebuild exited %d: %s", code, out)
	}
	var rep struct { // what `converge rebuild -o json` prints
		ViewsDropped      bool   `json:"views_dropped"`
		CheckpointDropped bool   `json:"checkpoint_dropped"`
		JournalSeq        uint64 `json:"journal_seq"`
		Rewritten         bool   `json:"rewritten"`
		Guests            int    `json:"guests"`
	}
	// The output is the JSON document, then any log lines.
	if err := json.NewDecoder(strings.NewReader(out[strings.Index(out, "{"):])).Decode(&rep); err != nil {
		t.Fatalf("rebuild output: %v\n%s", err, out)
	}
	if !rep.ViewsDropped || !rep.CheckpointDropped || !rep.Rewritten || rep.Guests < len(guests) {
		t.Fatalf("rebuild: %+v; want views and checkpoint dropped and %d+ guests rewritten", rep, len(guests))
	}
	wait(guests...) // every view is back, converged

	// Crash before the next checkpoint: the restart has none and folds the
	// journal from the start.
	before := actionsOf(js)
	up1.kill()
	up2 := up("up2")
	js = connect()
	eventually(t, 30*time.Second, "status of every guest after the restart", func() bool {
		st := (&upEnv{natsURL: natsURL}).status(t)
		n := 0
		for _, g := range st.Guests {
			if g.State == "converged" {
				n++
			}
		}
		return n >= len(guests)
	})
	changed := guests[0]
	if _, err := js.Publish(t.Context(), events.Subject(events.KindDesired, "pve", changed),
		[]byte(`{"vmid":`+strconv.Itoa(changed)+`,"description":"revision 3"}`)); err != nil {
		t.Fatal(err)
	}
	wait(guests...)
	after := actionsOf(js)
	for _, id := range guests {
		if id != changed && after[id] != before[id] {
			t.Fatalf("guest %d: %d actions before the restart, %d after, with nothing changed", id, before[id], after[id])
		}
	}
	if after[changed] <= before[changed] {
		t.Fatalf("guest %d: the change after the restart was not acted on", changed)
	}
	auditJournal(t, js)
	if b, _ := os.ReadFile(up2.log); !strings.Contains(string(b), "no checkpoint") {
		t.Fatal("up2 did not fold from the start (no \"no checkpoint\" in its log)")
	}

	// A clean stop checkpoints; the next start resumes from it.
	up2.stop(syscall.SIGTERM, 30*time.Second)
	up3 := up("up3")
	js = connect()
	desire(js, 1)
	wait(guests...)
	auditJournal(t, js)
	if b, _ := os.ReadFile(up3.log); !strings.Contains(string(b), "resuming from checkpoint") {
		t.Fatal("up3 did not resume from the checkpoint written on up2's shutdown")
	}
}
