package e2e

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/events"
)

type entry struct {
	seq  uint64
	info events.SubjectInfo
	data []byte
}

// readJournal reads the whole journal stream in order.
func readJournal(t *testing.T, js jetstream.JetStream) []entry {
	t.Helper()
	var out []entry
	for _, m := range journalMessages(t, js) {
		si, err := events.ParseSubject(m.Subject)
		if err != nil {
			t.Fatalf("seq %d: %v", m.Sequence, err)
		}
		out = append(out, entry{m.Sequence, si, m.Data})
	}
	return out
}

// journalMessages are every message of the journal, headers included.
func journalMessages(t *testing.T, js jetstream.JetStream) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "PVE")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := max(info.State.FirstSeq, 1); seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// auditJournal checks invariants 1 and 4 from the journal alone: per
// guest, an action is published only after the previous one's final
// result (one at a time, in planned order), every action ends in exactly
// one final result, and no result names an action that was never planned.
// It returns the newest desired revision per guest.
func auditJournal(t *testing.T, js jetstream.JetStream) (map[int]uint64, int) {
	t.Helper()
	outstanding := map[int]string{}
	finals := map[string]int{}
	planned := map[string]bool{}
	desired := map[int]uint64{}
	actions := 0
	for _, e := range readJournal(t, js) {
		vmid := e.info.VMID
		switch e.info.Kind {
		case events.KindDesired:
			desired[vmid] = e.seq
		case events.KindAction:
			a, err := events.Decode[events.Action](e.data)
			if err != nil {
				t.Fatal(err)
			}
			if prev, busy := outstanding[vmid]; busy {
				t.Fatalf("invariant 1: action %s (seq %d) planned while %s was still in flight", a.ID, e.seq, prev)
			}
			if planned[a.ID] {
				t.Fatalf("action %s planned twice", a.ID)
			}
			planned[a.ID] = true
			if a.Op == events.OpHold {
				continue // a record of a held step: no work, no result
			}
			outstanding[vmid] = a.ID
			actions++
		case events.KindResult:
			r, err := events.Decode[events.Result](e.data)
			if err != nil {
				t.Fatal(err)
			}
			if !planned[r.ActionID] {
				t.Fatalf("result for unknown action %s", r.ActionID)
			}
			if !r.Status.Final() {
				continue
			}
			finals[r.ActionID]++
			if finals[r.ActionID] > 1 {
				t.Fatalf("action %s has %d final results", r.ActionID, finals[r.ActionID])
			}
			if outstanding[vmid] == r.ActionID {
				delete(outstanding, vmid)
			}
		}
	}
	for vmid, id := range outstanding {
		t.Fatalf("invariant 4: action %s of guest %d never got a final result", id, vmid)
	}
	return desired, actions
}
