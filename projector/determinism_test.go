package projector_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/projector"
)

// journal generates a realistic, seeded journal: desired changes (some
// invalid), observations (some read before the previous one), actions,
// started and final results with embedded reads, heartbeats, resyncs,
// other clusters' events, garbage and redeliveries.
type journal struct {
	r      *rand.Rand
	seq    uint64
	evs    []projector.Event
	guests map[int]*guestGen
}

type guestGen struct {
	vmid       int
	desiredSeq uint64
	inFlight   string
	started    bool
	actions    int
}

func (j *journal) now() time.Time { return t0.Add(time.Duration(j.seq) * 100 * time.Millisecond) }

func (j *journal) add(subject string, data []byte, h map[string]string) {
	j.seq++
	ev := projector.Event{Seq: j.seq, Subject: subject, Data: data, Time: j.now()}
	if len(h) > 0 {
		ev.Header = hdr()
		for k, v := range h {
			ev.Header.Set(k, v)
		}
	}
	j.evs = append(j.evs, ev)
}

func (j *journal) pick(xs ...string) string { return xs[j.r.IntN(len(xs))] }

func (j *journal) observation(g *guestGen) *events.Observed {
	readAt := j.now().Add(-time.Duration(j.r.IntN(5000)) * time.Millisecond) // slow observers: reads land out of order
	o := observed(g.vmid, readAt, j.pick("running", "stopped", "paused"))
	o.Config.Cores = 1 + j.r.IntN(8)
	o.Config.Tags = []string{j.pick("prod", "dev")}
	if j.r.IntN(10) == 0 {
		o.Pending = map[string]string{"cores": fmt.Sprint(1 + j.r.IntN(8))}
	}
	if j.r.IntN(20) == 0 {
		o.Exists = false
	}
	return o
}

func (j *journal) desiredBody(g *guestGen) (string, bool) {
	switch j.r.IntN(12) {
	case 0:
		return fmt.Sprintf(`{"vmid":%d,"cores":0}`, g.vmid), false
	case 1:
		return fmt.Sprintf(`{"vmid":%d,"power":"on"}`, g.vmid+1), false
	case 2:
		return fmt.Sprintf(`{"vmid":%d,"kind":"lxc","absent":true}`, g.vmid), true
	}
	d := events.Desired{VMID: g.vmid, Power: ptr(events.Power(j.pick("running", "stopped")))}
	if j.r.IntN(2) == 0 {
		d.Cores = ptr(1 + j.r.IntN(8))
	}
	if j.r.IntN(3) == 0 {
		d.Tags = ptr([]string{j.pick("prod", "dev", "EU")})
	}
	if j.r.IntN(4) == 0 {
		d.Description = ptr("line\nnext " + fmt.Sprint(j.r.IntN(100)))
	}
	return string(body(d)), true
}

func generate(seed uint64, guests, n int) []projector.Event {
	j := &journal{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), guests: map[int]*guestGen{}}
	ids := make([]int, guests)
	for i := range ids {
		ids[i] = 100 + 7*i
		j.guests[ids[i]] = &guestGen{vmid: ids[i]}
	}
	for len(j.evs) < n {
		g := j.guests[ids[j.r.IntN(len(ids))]]
		switch roll := j.r.IntN(100); {
		case roll < 14: // desired
			b, ok := j.desiredBody(g)
			h := map[string]string{events.HeaderPublisher: j.pick("billing", "cli", "portal")}
			if j.r.IntN(3) == 0 {
				h[events.HeaderCorrelationID] = fmt.Sprintf("corr-%d", j.r.IntN(1000))
			}
			if j.r.IntN(40) == 0 {
				h[events.HeaderSchema], ok = "2", false
			}
			j.add(events.Subject(events.KindDesired, "pve", g.vmid)+".1", []byte(b), h)
			if ok {
				g.desiredSeq, g.actions = j.seq, 0
			}
		case roll < 40: // observed
			j.add(events.Subject(events.KindObserved, "pve", g.vmid)+".1", body(j.observation(g)), nil)
		case roll < 55: // action, sometimes from a superseded revision
			if g.inFlight != "" && j.r.IntN(4) != 0 {
				continue
			}
			g.actions++
			rev := g.desiredSeq
			if j.r.IntN(8) == 0 && rev > 0 {
				rev--
			}
			a := action(g.vmid, fmt.Sprintf("pve-%d-%d-%d", g.vmid, rev, g.actions), rev,
				events.Op(j.pick(string(events.OpStart), string(events.OpStop), string(events.OpSetConfig))))
			a.BasisSeq = j.seq
			j.add(events.Subject(events.KindAction, "pve", g.vmid)+".1", body(a), map[string]string{events.HeaderCorrelationID: "x"})
			g.inFlight, g.started = a.ID, false
		case roll < 63: // started
			if g.inFlight == "" || g.started {
				continue
			}
			j.add(events.Subject(events.KindResult, "pve", g.vmid)+".1", body(result(g.vmid, g.inFlight, events.ResultStarted, "", j.now())), nil)
			g.started = true
		case roll < 82: // final result, sometimes for an unknown action
			id := g.inFlight
			if id == "" || j.r.IntN(15) == 0 {
				id = fmt.Sprintf("stray-%d", j.r.IntN(100))
			}
			st := events.ResultStatus(j.pick("succeeded", "failed", "failed", "skipped"))
			class := ""
			if st == events.ResultFailed {
				class = j.pick("transient", "locked", "terminal", "unauthorized", "conflict")
			}
			r := result(g.vmid, id, st, class, j.now())
			if st != events.ResultFailed && j.r.IntN(2) == 0 {
				r.Observed = j.observation(g)
				r.Observed.Source = events.SourceExecutor
			}
			j.add(events.Subject(events.KindResult, "pve", g.vmid)+".1", body(r), nil)
			if id == g.inFlight {
				g.inFlight = ""
			}
		case roll < 90: // heartbeat
			ev := heartbeatEv(0, "pve", j.r.IntN(6) != 0, "")
			j.add(ev.Subject, ev.Data, nil)
		case roll < 92: // resync
			ev := controlEv(0, "pve", events.CommandResync)
			j.add(ev.Subject, ev.Data, nil)
		case roll < 95: // another cluster
			j.add(events.Subject(events.KindDesired, "lab", g.vmid)+".1", []byte(fmt.Sprintf(`{"vmid":%d}`, g.vmid)), nil)
		case roll < 97: // garbage
			j.add(events.Subject(events.Kind(j.pick("observed", "action", "result")), "pve", g.vmid), []byte(`{"oops`), nil)
		default: // redelivery of an earlier event
			if len(j.evs) > 0 {
				j.evs = append(j.evs, j.evs[j.r.IntN(len(j.evs))])
			}
		}
	}
	return j.evs
}

type changeRecord struct {
	VMID    int
	Cluster bool
	Resync  bool
	Err     string
}

func fold(p *projector.Projector, evs []projector.Event) []changeRecord {
	out := make([]changeRecord, 0, len(evs))
	for _, ev := range evs {
		ch := p.Apply(ev)
		rec := changeRecord{Cluster: ch.Cluster, Resync: ch.Resync}
		if ch.View != nil {
			rec.VMID = ch.View.VMID
		}
		if ch.Err != nil {
			rec.Err = ch.Err.Error()
		}
		out = append(out, rec)
	}
	return out
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestFoldIsDeterministic is invariant 5's core: the same events in the same
// order give the same views, however the fold is split or restarted.
func TestFoldIsDeterministic(t *testing.T) {
	evs := generate(20260301, 20, 2000)
	if len(evs) < 2000 {
		t.Fatalf("generated %d events", len(evs))
	}

	a, b := projector.New("pve"), projector.New("pve")
	changesA, changesB := fold(a, evs), fold(b, evs)
	if !reflect.DeepEqual(changesA, changesB) {
		t.Fatal("two folds of the same journal reported different changes")
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two fresh projectors disagree:\n%s\n%s", mustMarshal(t, a), mustMarshal(t, b))
	}
	want := mustMarshal(t, a)

	// One projector, fed in two halves.
	half := len(evs) / 2
	c := projector.New("pve")
	fold(c, evs[:half])
	fold(c, evs[half:])
	if !reflect.DeepEqual(a, c) {
		t.Fatalf("folding in two halves differs:\n got %s\nwant %s", mustMarshal(t, c), want)
	}

	// Restart between the halves: the materialised (JSON) projector is a
	// complete snapshot to continue from.
	d := projector.New("pve")
	fold(d, evs[:half])
	var restored projector.Projector
	if err := json.Unmarshal([]byte(mustMarshal(t, d)), &restored); err != nil {
		t.Fatal(err)
	}
	fold(&restored, evs[half:])
	if got := mustMarshal(t, &restored); got != want {
		t.Fatalf("restart from a JSON snapshot differs:\n got %s\nwant %s", got, want)
	}

	// At-least-once delivery: every event delivered twice in a row.
	e := projector.New("pve")
	for _, ev := range evs {
		e.Apply(ev)
		e.Apply(ev)
	}
	if !reflect.DeepEqual(a, e) {
		t.Fatalf("redelivery changed the fold:\n got %s\nwant %s", mustMarshal(t, e), want)
	}

	// The journal exercised the rules this test is meant to cover.
	var rejected, failing, terminal, inFlight, started, withResult, revActions int
	for _, v := range a.Views {
		if v.Rejected != nil {
			rejected++
		}
		if v.Failures > 0 {
			failing++
		}
		if v.Terminal {
			terminal++
		}
		if v.InFlight != nil {
			inFlight++
		}
		if v.Started != nil {
			started++
		}
		if v.LastResult != nil {
			withResult++
		}
		if v.RevisionActions > 0 {
			revActions++
		}
	}
	var errs, resyncs int
	for _, ch := range changesA {
		if ch.Err != "" {
			errs++
		}
		if ch.Resync {
			resyncs++
		}
	}
	t.Logf("views %d: rejected %d failing %d terminal %d in flight %d started %d with result %d revision actions %d; fold errors %d resyncs %d",
		len(a.Views), rejected, failing, terminal, inFlight, started, withResult, revActions, errs, resyncs)
	if len(a.Views) != 20 || withResult == 0 || inFlight == 0 || revActions == 0 || errs == 0 || resyncs == 0 || a.State.HeartbeatSeq == 0 {
		t.Fatal("the generated journal no longer covers the fold rules; adjust the generator")
	}
}

// TestPredecodeFoldsTheSame: decoding a batch ahead, in parallel, gives
// exactly the views, state and changes of folding event by event.
func TestPredecodeFoldsTheSame(t *testing.T) {
	evs := generate(7, 20, 2000)
	plain := projector.New("pve")
	want := fold(plain, evs)

	batch := append([]projector.Event(nil), evs...)
	pre := projector.New("pve")
	var got []changeRecord
	for lo := 0; lo < len(batch); lo += 300 {
		part := batch[lo:min(lo+300, len(batch))]
		projector.Predecode(part, 4)
		got = append(got, fold(pre, part)...)
	}
	if mustMarshal(t, got) != mustMarshal(t, want) {
		t.Fatal("changes differ with predecoding")
	}
	if mustMarshal(t, pre.Views) != mustMarshal(t, plain.Views) || mustMarshal(t, pre.State) != mustMarshal(t, plain.State) {
		t.Fatal("views differ with predecoding")
	}
}
