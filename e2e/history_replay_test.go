package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/audit"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/internal/views"
)

// runSplit runs a converge command to completion and keeps stdout apart
// from stderr, so that machine-readable output can be parsed whole.
func runSplit(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, converge, args...)
	cmd.Env = append(os.Environ(), "CONVERGE_LOG_LEVEL=warn")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// mustRun runs a converge command that must succeed and returns its stdout.
func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, errs, code := runSplit(t, args...)
	if code != 0 {
		t.Fatalf("converge %s exited %d:\n%s%s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

// jsonLines parses -o jsonl output: every line must be one JSON object.
func jsonLines[T any](t *testing.T, out string) []T {
	t.Helper()
	var rows []T
	for i, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		var obj map[string]any
		if err := json.Unmarshal([]byte(line), &obj); err != nil {
			t.Fatalf("jsonl line %d is not a JSON object: %v\n%s", i+1, err, line)
		}
		var r T
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	return rows
}

type historyDoc struct {
	VMID    int           `json:"vmid"`
	Cluster string        `json:"cluster"`
	Entries []audit.Entry `json:"entries"`
}

// TestHistoryJSONLOnlyWhereRecordsStream: -o jsonl is refused, before
// anything is dialled, by commands that print one document.
func TestHistoryJSONLOnlyWhereRecordsStream(t *testing.T) {
	for _, args := range [][]string{{"status"}, {"plan"}, {"wait", "101"}, {"desire", "101", "--power", "running"}, {"resync"}} {
		_, errs, code := runSplit(t, append(args, "-o", "jsonl", "--nats", "nats://127.0.0.1:1")...)
		if code == 0 || !contains(errs, "-o jsonl", "use -o json") {
			t.Errorf("%v -o jsonl: exit %d: %s", args, code, errs)
		}
	}
	if _, errs, code := runSplit(t, "history", "101", "-o", "yaml"); code == 0 || !strings.Contains(errs, "text, json or jsonl") {
		t.Errorf("-o yaml: exit %d: %s", code, errs)
	}
	for _, bad := range []string{"0", "yesterday", "-5m"} {
		if _, errs, code := runSplit(t, "replay", "--until", bad, "--nats", "nats://127.0.0.1:1"); code == 0 || !strings.Contains(errs, "--until") {
			t.Errorf("--until %s: exit %d: %s", bad, code, errs)
		}
	}
	if _, errs, code := runSplit(t, "history", "101", "--since", "soon", "--nats", "nats://127.0.0.1:1"); code == 0 || !strings.Contains(errs, "--since") {
		t.Errorf("--since soon: exit %d: %s", code, errs)
	}
}

func (e *upEnv) setFaults(t *testing.T, body string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPatch, e.simURL+"/_sim/faults", strings.NewReader(body))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("PATCH /_sim/faults %s: %s", body, res.Status)
	}
}

// journalResults returns the guest's results in the journal, in order.
func journalResults(t *testing.T, js jetstream.JetStream, vmid int) []events.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	es, err := audit.Timeline(ctx, js, "PVE", "pve", vmid, 0, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var out []events.Result
	for _, e := range es {
		if e.Result != nil {
			out = append(out, *e.Result)
		}
	}
	return out
}

// countResults counts the cluster's results of a status in the journal.
func countResults(t *testing.T, js jetstream.JetStream, status events.ResultStatus) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "PVE")
	if err != nil {
		t.Fatal(err)
	}
	oc, release, err := bus.ReadOnce(ctx, s, jetstream.OrderedConsumerConfig{FilterSubjects: []string{"pve.result.pve.>"}})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if oc.CachedInfo().NumPending == 0 {
		return 0
	}
	it, err := oc.Messages()
	if err != nil {
		t.Fatal(err)
	}
	defer it.Stop()
	n := 0
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		if r, _ := events.Decode[events.Result](m.Data()); r.Status == status {
			n++
		}
		if md, err := m.Metadata(); err != nil || md.NumPending == 0 {
			return n
		}
	}
}

// TestHistoryOfOneGuest: guest 101 goes through a config change, drift made
// behind converge's back and corrected, and a failed Proxmox task (a start)
// retried; `converge history` shows each step in order with its correlation
// id and task id (none for a config write whose task ended within
// background_delay), as text, JSON and JSON lines.
func TestHistoryOfOneGuest(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	start := time.Now()
	phase := func(name string) { t.Logf("%6.2fs %s", time.Since(start).Seconds(), name) }
	e := startUp(t, 4)
	phase("up is ready")

	// 1. A config change (101 is a stopped QEMU VM: the config applies at once).
	out := mustRun(t, "desire", "101", "--nats", e.natsURL, "--power", "stopped", "--cores", "3", "--memory", "1536",
		"--description", "first revision", "--publisher", "history-test", "--correlation-id", "corr-1", "-o", "json")
	var pub []struct{ Seq uint64 }
	if err := json.Unmarshal([]byte(out), &pub); err != nil || len(pub) != 1 {
		t.Fatalf("desire output: %v %s", err, out)
	}
	rev1 := pub[0].Seq
	e.wait(t, []int{101})
	phase("revision 1 converged")

	// 2. Drift through the Proxmox API: the observer sees it and the
	// planner corrects it under the same desired revision.
	g := e.simGuests(t)[101]
	ref := pve.GuestRef{Kind: pve.Kind(g.Kind), Node: g.Node, VMID: 101}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := e.pveClient(t).UpdateConfig(ctx, ref, pve.ConfigChange{Set: map[string]string{"description": "edited by hand"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the drift corrected in Proxmox", func() bool {
		// Revision 1's config write and the correction: each one final
		// result (their tasks end within background_delay).
		rs := journalResults(t, e.js, 101)
		return len(rs) >= 2 && rs[len(rs)-1].Status == events.ResultSucceeded &&
			strings.TrimSpace(e.simGuests(t)[101].Config["description"]) == "first revision"
	})
	e.wait(t, []int{101})
	phase("drift corrected")

	// 3. A failed task: every mutation fails until the fault is lifted; the
	// planner retries with backoff. Published raw: no publisher, no
	// correlation id (converge derives one).
	// Not the default flock timeout: converge waits that out as a lock.
	e.setFaults(t, `{"fail_rate":1,"fail_message":"start failed: QEMU exited with code 1"}`)
	rev2 := e.publish(t, 101, `{"vmid":101,"power":"running","cores":3,"memory_mib":1536,"description":"first revision"}`)
	eventually(t, 60*time.Second, "a failed start with its task", func() bool {
		for _, r := range journalResults(t, e.js, 101) {
			if r.Status == events.ResultFailed && r.Op == events.OpStart && r.UPID != "" {
				return true
			}
		}
		return false
	})
	e.setFaults(t, `{"fail_rate":0}`)
	e.wait(t, []int{101})
	phase("revision 2 converged after a failure")

	// JSON: one document, every step in order.
	var doc historyDoc
	if err := json.Unmarshal([]byte(mustRun(t, "history", "101", "--nats", e.natsURL, "-o", "json")), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.VMID != 101 || doc.Cluster != "pve" || len(doc.Entries) == 0 {
		t.Fatalf("history document: %+v", doc)
	}
	es := doc.Entries
	for i := 1; i < len(es); i++ {
		if es[i].Seq <= es[i-1].Seq {
			t.Fatalf("entries out of order: %d after %d", es[i].Seq, es[i-1].Seq)
		}
	}
	pos := 0
	find := func(what string, ok func(e audit.Entry) bool) audit.Entry {
		t.Helper()
		for ; pos < len(es); pos++ {
			if ok(es[pos]) {
				pos++
				return es[pos-1]
			}
		}
		var b strings.Builder
		for _, e := range es {
			fmt.Fprintf(&b, "  %d %s %s %s %s\n", e.Seq, e.Kind, e.CorrelationID, e.TaskID, e.Summary)
		}
		t.Fatalf("history: no %s (in order) in\n%s", what, b.String())
		return audit.Entry{}
	}
	d1 := find("desired revision 1", func(e audit.Entry) bool {
		return e.Kind == events.KindDesired && e.Seq == rev1 && e.Who == "history-test" && e.CorrelationID == "corr-1" &&
			e.Desired != nil && *e.Desired.Cores == 3
	})
	a1 := find("its set_config", func(e audit.Entry) bool {
		return e.Kind == events.KindAction && e.Action.Op == events.OpSetConfig && e.Action.DesiredSeq == d1.Seq && e.CorrelationID == "corr-1"
	})
	// The config task ended within background_delay: Proxmox answered
	// without it, so there is no task id and no "started".
	find("its config write succeeded", func(e audit.Entry) bool {
		return e.Kind == events.KindResult && e.Result.ActionID == a1.Action.ID && e.Result.Status == events.ResultSucceeded &&
			e.TaskID == "" && e.CorrelationID == "corr-1"
	})
	drift := find("the drift observed", func(e audit.Entry) bool {
		return e.Kind == events.KindObserved && strings.Contains(strings.Join(e.Changes, ";"), `"edited by hand"`)
	})
	a2 := find("the correction", func(e audit.Entry) bool {
		return e.Kind == events.KindAction && e.Action.DesiredSeq == rev1 && e.CorrelationID == "corr-1" &&
			e.Action.Set["description"] == "first revision" && e.Action.BasisSeq >= drift.Seq
	})
	find("the correction's result", func(e audit.Entry) bool {
		return e.Kind == events.KindResult && e.Result.ActionID == a2.Action.ID && e.Result.Status == events.ResultSucceeded &&
			e.CorrelationID == "corr-1"
	})
	corr2 := fmt.Sprintf("desired-pve-101-%d", rev2)
	find("desired revision 2", func(e audit.Entry) bool {
		return e.Kind == events.KindDesired && e.Seq == rev2 && e.Who == "unknown" && e.CorrelationID == corr2
	})
	failed := find("a failed task", func(e audit.Entry) bool {
		return e.Kind == events.KindResult && e.Result.Status == events.ResultFailed && e.Result.Op == events.OpStart && strings.HasPrefix(e.TaskID, "UPID:") &&
			e.Result.ErrorClass != "" && e.Result.Error != "" && e.CorrelationID == corr2 && e.Result.Executor != ""
	})
	retry := find("the retry", func(e audit.Entry) bool {
		return e.Kind == events.KindAction && e.Action.DesiredSeq == rev2 && e.Action.Attempt >= 2 && e.CorrelationID == corr2
	})
	r3 := find("the retry's success", func(e audit.Entry) bool {
		return e.Kind == events.KindResult && e.Result.ActionID == retry.Action.ID && e.Result.Status == events.ResultSucceeded &&
			strings.HasPrefix(e.TaskID, "UPID:") && e.CorrelationID == corr2
	})
	if failed.TaskID == r3.TaskID {
		t.Fatalf("the failed task and the retry's share the task id %s", r3.TaskID)
	}
	// Identical polls are left out: the guest was polled every 200 ms.
	nobs := 0
	for _, e := range es {
		if e.Kind == events.KindObserved {
			nobs++
		}
	}
	if nobs > 12 {
		t.Errorf("%d observations in the history: identical polls not left out?", nobs)
	}
	phase("json checked")

	// Text: the same steps, readable, in the same order.
	text := mustRun(t, "history", "101", "--nats", e.natsURL)
	at := func(s string) int {
		i := strings.Index(text, s)
		if i < 0 {
			t.Fatalf("text history lacks %q:\n%s", s, text)
		}
		return i
	}
	order := []int{at("history-test"), at("edited by hand"), at(corr2), at(failed.TaskID), at(r3.TaskID)}
	if !sort.IntsAreSorted(order) {
		t.Fatalf("text history out of order %v:\n%s", order, text)
	}
	for _, s := range []string{"TIME", "SEQ", "KIND", "WHO", "CORRELATION", "TASK", "WHAT", "corr-1", "result:failed", "result:succeeded",
		string(failed.Result.ErrorClass), "attempt 2"} {
		at(s)
	}

	// JSON lines: every line a self-contained object, the same entries.
	lines := jsonLines[audit.Entry](t, mustRun(t, "history", "101", "--nats", e.natsURL, "-o", "jsonl"))
	if len(lines) < len(es) {
		t.Fatalf("jsonl has %d entries, json %d", len(lines), len(es))
	}
	for i, l := range lines {
		if l.VMID != 101 || l.Cluster != "pve" || l.Seq == 0 || l.Time.IsZero() || l.Kind == "" || l.Summary == "" {
			t.Fatalf("jsonl line %d not self-contained: %+v", i+1, l)
		}
		if i < len(es) && l.Seq != es[i].Seq {
			t.Fatalf("jsonl line %d is seq %d, json entry %d", i+1, l.Seq, es[i].Seq)
		}
	}

	// --since: from revision 2 on.
	var since historyDoc
	if err := json.Unmarshal([]byte(mustRun(t, "history", "101", "--nats", e.natsURL, "-o", "json",
		"--since", es[indexOf(es, rev2)].Time.Format(time.RFC3339Nano))), &since); err != nil {
		t.Fatal(err)
	}
	if len(since.Entries) == 0 || since.Entries[0].Seq != rev2 {
		t.Fatalf("--since revision 2: %+v", since.Entries)
	}
	phase("text, jsonl and --since checked")
}

func indexOf(es []audit.Entry, seq uint64) int {
	for i, e := range es {
		if e.Seq == seq {
			return i
		}
	}
	return -1
}

type replayOut struct {
	AsOf struct {
		Seq  uint64    `json:"seq"`
		Time time.Time `json:"time"`
	} `json:"as_of"`
	Until  *audit.Point    `json:"until"`
	Guests []views.Summary `json:"guests"`
}

func (r replayOut) guest(vmid int) *views.Summary {
	for i := range r.Guests {
		if r.Guests[i].VMID == vmid {
			return &r.Guests[i]
		}
	}
	return nil
}

func replayJSON(t *testing.T, natsURL string, args ...string) replayOut {
	t.Helper()
	var r replayOut
	out := mustRun(t, append([]string{"replay", "--nats", natsURL, "-o", "json"}, args...)...)
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("replay output: %v\n%s", err, out)
	}
	return r
}

// TestReplayUntil: desired revisions A then B of a guest; a replay up to a
// point between them (by sequence and by time) shows A, one of the whole
// journal shows B.
func TestReplayUntil(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	e := startUp(t, 4)
	seqA := e.publish(t, 100, `{"vmid":100,"power":"running","description":"revision A"}`)
	// The stream stamped A before acknowledging it, and stamps B after
	// this reading of the same clock.
	between := time.Now()
	seqB := e.publish(t, 100, `{"vmid":100,"power":"running","description":"revision B"}`)
	e.wait(t, []int{100})

	for _, until := range []string{strconv.FormatUint(seqA, 10), between.Format(time.RFC3339Nano)} {
		r := replayJSON(t, e.natsURL, "--until", until)
		g := r.guest(100)
		if g == nil || g.Desired == nil || *g.Desired.Description != "revision A" || g.Revision != seqA {
			t.Fatalf("--until %s: guest 100 %+v", until, g)
		}
		if r.AsOf.Seq < seqA || r.AsOf.Seq >= seqB || r.Until == nil {
			t.Fatalf("--until %s: as of %+v, until %+v (A %d, B %d)", until, r.AsOf, r.Until, seqA, seqB)
		}
		if text := mustRun(t, "replay", "--nats", e.natsURL, "--until", until); !contains(text, `"revision A"`, "replayed up to") ||
			strings.Contains(text, "revision B") {
			t.Fatalf("--until %s, text:\n%s", until, text)
		}
	}
	r := replayJSON(t, e.natsURL)
	g := r.guest(100)
	if g == nil || g.Desired == nil || *g.Desired.Description != "revision B" || g.Revision != seqB || r.Until != nil || r.AsOf.Seq <= seqB {
		t.Fatalf("whole journal: as of %+v, guest 100 %+v", r.AsOf, g)
	}
	// Before the first event: nothing.
	if r := replayJSON(t, e.natsURL, "--until", "2000-01-01T00:00:00Z"); len(r.Guests) != 0 || r.AsOf.Seq != 0 {
		t.Fatalf("before the journal: %+v", r)
	}
	// JSON lines: one guest per line, each saying where it stands.
	type line struct {
		AsOfSeq uint64 `json:"as_of_seq"`
		views.Summary
	}
	ls := jsonLines[line](t, mustRun(t, "replay", "--nats", e.natsURL, "--until", strconv.FormatUint(seqA, 10), "-o", "jsonl"))
	seen := map[int]bool{}
	for _, l := range ls {
		if l.AsOfSeq != seqA || l.Cluster != "pve" || l.State == "" || seen[l.VMID] {
			t.Fatalf("jsonl line %+v", l)
		}
		seen[l.VMID] = true
	}
	if !seen[100] {
		t.Fatal("jsonl lacks guest 100")
	}
	// No progress bar for a short replay off a terminal.
	if _, errs, _ := runSplit(t, "replay", "--nats", e.natsURL); strings.Contains(errs, "replaying") {
		t.Fatalf("stderr of a short replay: %q", errs)
	}
}

// comparable is what both `converge status -o json` and `converge replay
// -o json` show of a guest, less the time each document was made.
func comparable(s views.Summary) string {
	s.UpdatedAt = time.Time{}
	b, _ := json.Marshal(s)
	return string(b)
}

func statusSummaries(t *testing.T, natsURL string) map[int]string {
	t.Helper()
	var doc struct {
		Guests []views.Summary `json:"guests"`
	}
	out := mustRun(t, "status", "--nats", natsURL, "-o", "json")
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("status output: %v\n%s", err, out)
	}
	m := map[int]string{}
	for _, s := range doc.Guests {
		m[s.VMID] = comparable(s)
	}
	return m
}

// TestReplayEqualsLiveViews is invariant 5 with real processes: after a
// randomised run (desired changes over many guests, some invalid, drift
// made through Proxmox's API, a period of failing tasks, and converge up
// SIGKILLed mid-run and restarted on the same data), `converge replay -o
// json`, rebuilt from the stream alone, shows every guest exactly as the
// live planner's views do (`converge status -o json`): desired state and
// revision, publisher, observed state, last action and result, last
// error, state, reason, drift and next steps. Only the documents' own
// timestamps (updated_at) differ.
func TestReplayEqualsLiveViews(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CONVERGE_TEST_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (CONVERGE_TEST_SEED reruns it)", seed)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	start := time.Now()
	phase := func(name string) { t.Logf("%6.2fs %s", time.Since(start).Seconds(), name) }

	const token, secret = "root@pam!inv5", "inv5-secret"
	sim, err := pvesim.New(pvesim.Options{Guests: 24, Nodes: 3, DemoTemplates: true, Seed: seed, Tokens: map[string]string{token: secret}})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	pc := pve.DefaultConfig()
	pc.URL, pc.TokenID, pc.TokenSecret = sim.URL(), token, secret
	px, err := pve.New(pc)
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	t.Setenv("CONVERGE_DATA", data) // the CLI and natsConnect find up's NATS credentials there
	var natsURL string
	var js jetstream.JetStream
	// up starts converge up on the journal in data, on addresses of its
	// own: a restart never counts on getting back a port its predecessor
	// released (another process may have taken it meanwhile).
	up := func(name string) *proc {
		natsAddr, httpAddr := freeAddr(t), freeAddr(t)
		natsURL = "nats://" + natsAddr
		p := startProc(t, name, "up", "--data", data, "--nats-listen", natsAddr, "--http", httpAddr,
			"--pve-url", sim.URL(), "--pve-token-id", token, "--pve-token-secret", secret,
			"--observe-interval", "200ms", "--config-refresh", "1s",
			// Rounds that stop and reboot most guests: held guests and
			// approvals replay in TestSafetyCommands.
			"--guard-share", "1")
		p.ready(t, 90*time.Second, "http://"+httpAddr+"/readyz")
		nc, err := natsConnect(t, natsURL, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, _ = jetstream.New(nc)
		return p
	}
	first := up("up1")
	phase("up is ready")

	var guests []int
	kinds := map[int]pve.Kind{}
	for _, g := range sim.Guests() {
		if !g.Template {
			guests = append(guests, g.VMID)
			kinds[g.VMID] = pve.Kind(g.Kind)
		}
	}
	sort.Ints(guests)
	// valid holds the guests whose newest desired event is valid and can
	// converge (waited for); the others end rejected or blocked.
	valid := map[int]bool{}
	publish := func(vmid int, body string) {
		t.Helper()
		msg := &nats.Msg{Subject: events.Subject(events.KindDesired, "pve", vmid), Data: []byte(body), Header: nats.Header{}}
		msg.Header.Set(events.HeaderPublisher, []string{"billing", "portal", "ci"}[rng.IntN(3)])
		if rng.IntN(2) == 0 {
			msg.Header.Set(events.HeaderCorrelationID, fmt.Sprintf("corr-%d", rng.IntN(1_000_000)))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := js.PublishMsg(ctx, msg, jetstream.WithRetryAttempts(100), jetstream.WithRetryWait(100*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	// Guest 1 of the list stays unmanaged throughout (invariant 7 aside,
	// its view is still compared).
	managed := guests[1:]
	round := func(n int) {
		t.Helper()
		for _, i := range rng.Perm(len(managed))[:n] {
			vmid := managed[i]
			switch roll := rng.IntN(20); {
			case roll == 0: // invalid: rejected, nothing planned
				publish(vmid, fmt.Sprintf(`{"vmid":%d,"cores":0,"colour":"red"}`, vmid))
				delete(valid, vmid)
			case roll == 1: // absent: held behind the destroy gate (blocked)
				publish(vmid, fmt.Sprintf(`{"vmid":%d,"absent":true}`, vmid))
				delete(valid, vmid)
			default:
				power := []string{"running", "stopped"}[rng.IntN(2)]
				// Restarts allowed: a cores change on a running VM
				// converges by a reboot (never, the default, leaves it
				// pending for good).
				body := fmt.Sprintf(`{"vmid":%d,"power":%q,"cores":%d,"memory_mib":%d,"description":"rev %d","tags":[%q],"restart":"allowed"}`,
					vmid, power, 1+rng.IntN(4), []int{512, 1024, 2048}[rng.IntN(3)], rng.IntN(1000), []string{"web", "db", "batch"}[rng.IntN(3)])
				publish(vmid, body)
				valid[vmid] = true
			}
		}
	}
	drift := func(n int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, i := range rng.Perm(len(managed))[:n] {
			vmid := managed[i]
			g, _ := sim.Guest(vmid)
			ref := pve.GuestRef{Kind: kinds[vmid], Node: g.Node, VMID: vmid}
			var err error
			switch {
			case rng.IntN(2) == 0 && g.Status == "running":
				_, err = px.Stop(ctx, ref)
			case rng.IntN(2) == 0 && g.Status == "stopped":
				_, err = px.Start(ctx, ref)
			default:
				_, err = px.UpdateConfig(ctx, ref, pve.ConfigChange{Set: map[string]string{"description": "changed by hand " + strconv.Itoa(rng.IntN(100))}})
			}
			// A guest converge is writing at this moment may refuse (lock,
			// digest): drift is best effort.
			if err != nil {
				t.Logf("drift on %d: %v", vmid, err)
			}
		}
	}
	failedResults := func() int { return countResults(t, js, events.ResultFailed) }
	waitValid := func() {
		t.Helper()
		ids := make([]int, 0, len(valid))
		for id := range valid {
			ids = append(ids, id)
		}
		sort.Ints(ids)
		args := []string{"wait", "--nats", natsURL, "--timeout", "3m"}
		for _, id := range ids {
			args = append(args, strconv.Itoa(id))
		}
		if out, errs, code := runSplit(t, args...); code != 0 {
			t.Fatalf("converge wait exited %d: %s%s", code, out, errs)
		}
	}

	round(len(managed))
	waitValid()
	phase("round 1 converged")
	drift(6)
	round(10)
	phase("drift and round 2 published")

	// A fault period: tasks fail until it ends; retries back off.
	before := failedResults()
	if err := sim.UpdateFaults(func(f *pvesim.Faults) { f.FailRate, f.FailMessage = 0.5, "start failed: QEMU exited with code 1" }); err != nil {
		t.Fatal(err)
	}
	round(12)
	eventually(t, 60*time.Second, "failed results during the fault period", func() bool { return failedResults() > before })
	if err := sim.UpdateFaults(func(f *pvesim.Faults) { f.FailRate = 0 }); err != nil {
		t.Fatal(err)
	}
	phase("fault period over")

	// A crash with work in flight, and a restart on the same journal.
	round(10)
	drift(4)
	first.kill()
	phase("converge up SIGKILLed")
	up("up2")
	phase("converge up restarted")
	round(8)
	drift(4)
	waitValid()
	phase("every valid guest converged")

	// Views are materialised on the planner's tick and the last
	// observations may still be arriving: compare until both sides agree,
	// and show the difference if they never do.
	var diff string
	deadline := time.Now().Add(90 * time.Second)
	for {
		live := statusSummaries(t, natsURL)
		r := replayJSON(t, natsURL)
		replayed := map[int]string{}
		states := map[string]int{}
		for _, s := range r.Guests {
			replayed[s.VMID] = comparable(s)
			states[string(s.State)]++
		}
		diff = ""
		for id, want := range live {
			if got, ok := replayed[id]; !ok {
				diff += fmt.Sprintf("guest %d: live view, not replayed\n", id)
			} else if got != want {
				diff += fmt.Sprintf("guest %d:\n  live   %s\n  replay %s\n", id, want, got)
			}
		}
		for id := range replayed {
			if _, ok := live[id]; !ok {
				diff += fmt.Sprintf("guest %d: replayed, no live view\n", id)
			}
		}
		if diff == "" {
			t.Logf("replay up to seq %d equals the live views of %d guests: %v", r.AsOf.Seq, len(r.Guests), states)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replay differs from the live views after 90s:\n%s", diff)
		}
		time.Sleep(500 * time.Millisecond) // paces the polling only; the loop waits for a condition
	}
	if failedResults() == 0 {
		t.Fatal("the run had no failed task")
	}
	auditJournal(t, js)
	phase("compared")
}
