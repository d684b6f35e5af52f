package projector_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/projector"
)

// t0 is the start of every scripted timeline; tests never read the clock.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }

func ptr[T any](v T) *T { return &v }

func body(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func hdr(kv ...string) events.Header {
	h := events.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func desiredEv(seq uint64, vmid int, data string, h events.Header) projector.Event {
	return projector.Event{Seq: seq, Subject: events.Subject(events.KindDesired, "pve", vmid), Header: h, Data: []byte(data), Time: at(int(seq))}
}

func observed(vmid int, readAt time.Time, status string) *events.Observed {
	return &events.Observed{Meta: events.NewMeta("observer", "", readAt), VMID: vmid, Cluster: "pve", Exists: true, Node: "pve1",
		Kind: events.QEMU, Status: status, Digest: fmt.Sprintf("d-%d", readAt.Unix()),
		Config: events.GuestConfig{Name: "web", Cores: 2, MemoryMiB: 2048}, ReadAt: readAt, Source: events.SourceObserver}
}

func observedEv(seq uint64, o *events.Observed) projector.Event {
	return projector.Event{Seq: seq, Subject: events.Subject(events.KindObserved, o.Cluster, o.VMID) + ".3", Data: body(o), Time: at(int(seq))}
}

func action(vmid int, id string, desiredSeq uint64, op events.Op) events.Action {
	return events.Action{Meta: events.NewMeta("planner", "c", t0), ID: id, VMID: vmid, Cluster: "pve", Node: "pve1",
		Kind: events.QEMU, Op: op, Reason: "test", DesiredSeq: desiredSeq, Attempt: 1}
}

func actionEv(seq uint64, a events.Action) projector.Event {
	return projector.Event{Seq: seq, Subject: events.Subject(events.KindAction, "pve", a.VMID), Data: body(a), Time: at(int(seq))}
}

func result(vmid int, actionID string, status events.ResultStatus, class string, when time.Time) events.Result {
	r := events.Result{Meta: events.NewMeta("executor", "c", when), ActionID: actionID, VMID: vmid, Cluster: "pve",
		Op: events.OpStart, Status: status, ErrorClass: events.ErrorClass(class)}
	if status == events.ResultStarted || status == events.ResultSucceeded {
		r.UPID = "UPID:pve1:0000ABCD:00000001:00000000:qmstart:" + fmt.Sprint(vmid) + ":root@pam:"
	}
	if class != "" {
		r.Error = class + " failure"
	}
	return r
}

func resultEv(seq uint64, r events.Result) projector.Event {
	return projector.Event{Seq: seq, Subject: events.Subject(events.KindResult, "pve", r.VMID) + ".7", Data: body(r), Time: at(int(seq))}
}

func heartbeatEv(seq uint64, cluster string, reachable bool, errText string) projector.Event {
	hb := events.Heartbeat{Meta: events.NewMeta("observer", "", at(int(seq))), Cluster: cluster, Observer: "obs-1",
		Reachable: reachable, Error: errText, Pass: seq, Guests: 3, Interval: 10 * time.Second}
	return projector.Event{Seq: seq, Subject: events.ClusterSubject(events.KindHeartbeat, cluster), Data: body(hb), Time: at(int(seq))}
}

func controlEv(seq uint64, cluster, command string) projector.Event {
	c := events.Control{Meta: events.NewMeta("cli", "", at(int(seq))), Command: command}
	return projector.Event{Seq: seq, Subject: events.ClusterSubject(events.KindControl, cluster), Data: body(c), Time: at(int(seq))}
}

// applyAll folds events and fails on any fold error.
func applyAll(t *testing.T, p *projector.Projector, evs ...projector.Event) {
	t.Helper()
	for _, ev := range evs {
		if ch := p.Apply(ev); ch.Err != nil {
			t.Fatalf("Apply(seq %d, %s): %v", ev.Seq, ev.Subject, ch.Err)
		}
	}
}

func snapshot(t *testing.T, p *projector.Projector) string {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
