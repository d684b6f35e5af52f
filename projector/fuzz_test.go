package projector_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/projector"
)

var fuzzKinds = []events.Kind{events.KindDesired, events.KindObserved, events.KindAction, events.KindResult,
	events.KindHeartbeat, events.KindControl}

// fuzzEvent is the n-th event of a fuzzed journal for guest 101.
func fuzzEvent(n int, kind byte, body []byte) projector.Event {
	k := fuzzKinds[int(kind)%len(fuzzKinds)]
	subject := events.Subject(k, events.DefaultCluster, 101)
	if k == events.KindHeartbeat || k == events.KindControl {
		subject = events.ClusterSubject(k, events.DefaultCluster)
	}
	h := events.Header{}
	h.Set(events.HeaderPublisher, "fuzz")
	return projector.Event{Seq: uint64(n + 1), Subject: subject, Header: h, Data: body,
		Time: time.Date(2026, 11, 24, 6, 0, n, 0, time.UTC)}
}

func snapshotJSON(t *testing.T, p *projector.Projector) string {
	b, err := json.Marshal(p.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// FuzzFold: whatever the journal holds, folding it never panics, folds
// the same with and without predecoding (live and replay), and a
// checkpoint restored continues exactly where the fold stood.
func FuzzFold(f *testing.F) {
	f.Add(byte(0), []byte(`{"vmid":101,"power":"running","cores":2}`),
		byte(1), []byte(`{"vmid":101,"exists":true,"kind":"qemu","node":"pve1","power":"stopped","config":{"cores":1},"read_at":"2026-11-24T06:00:00Z"}`),
		byte(2), []byte(`{"id":"a1","vmid":101,"op":"start","desired_seq":1,"basis_seq":2}`),
		byte(3), []byte(`{"action_id":"a1","vmid":101,"op":"start","status":"succeeded","observed":{"vmid":101,"exists":true,"power":"running"}}`))
	f.Add(byte(0), []byte(`{"vmid":101,"cores":0}`), byte(4), []byte(`{"reachable":false,"error":"x"}`),
		byte(5), []byte(`{"command":"resync"}`), byte(3), []byte(`{"action_id":"zz","vmid":101,"status":"started","upid":"UPID:pve1:1:2:3:qmstart:101:u:"}`))
	f.Add(byte(0), []byte(`{"vmid":102}`), byte(1), []byte(`{"vmid":101,"config":{"tags":null}}`),
		byte(2), []byte(`{"C\`), byte(3), []byte(`null`))
	f.Fuzz(func(t *testing.T, k1 byte, b1 []byte, k2 byte, b2 []byte, k3 byte, b3 []byte, k4 byte, b4 []byte) {
		evs := []projector.Event{fuzzEvent(0, k1, b1), fuzzEvent(1, k2, b2), fuzzEvent(2, k3, b3), fuzzEvent(3, k4, b4)}
		live := projector.New(events.DefaultCluster)
		for _, ev := range evs {
			live.Apply(ev)
		}
		pre := make([]projector.Event, len(evs))
		copy(pre, evs)
		projector.Predecode(pre, 2)
		replay := projector.New(events.DefaultCluster)
		for _, ev := range pre {
			replay.Apply(ev)
		}
		if a, b := snapshotJSON(t, live), snapshotJSON(t, replay); a != b {
			t.Fatalf("predecoded fold differs:\n%s\n%s", a, b)
		}
		half := projector.New(events.DefaultCluster)
		half.Apply(evs[0])
		half.Apply(evs[1])
		raw, err := json.Marshal(half.Snapshot())
		if err != nil {
			t.Fatal(err)
		}
		var snap projector.Snapshot
		if err := json.Unmarshal(raw, &snap); err != nil {
			t.Fatalf("a checkpoint does not decode: %v", err)
		}
		restored, err := projector.Restore(&snap, events.DefaultCluster, nil)
		if err != nil {
			t.Fatalf("a checkpoint is refused: %v", err)
		}
		restored.Apply(evs[2])
		restored.Apply(evs[3])
		if a, b := snapshotJSON(t, live), snapshotJSON(t, restored); a != b {
			t.Fatalf("restored fold differs:\n%s\n%s", a, b)
		}
	})
}
