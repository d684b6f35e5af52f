package events_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"testing"

	"github.com/converge-pve/converge/events"
)

// journalLine is one stored message of testdata/journal-053c05e.jsonl
// (testdata/README.md says how it was made).
type journalLine struct {
	Run     int                 `json:"run"`
	Stream  string              `json:"stream"`
	Seq     uint64              `json:"seq"`
	Subject string              `json:"subject"`
	Header  map[string][]string `json:"header"`
	Body    string              `json:"body"`
}

// TestJournalOf053c05e: every event a converge of commit 053c05e journalled
// (goccy/go-json's bytes) decodes with today's code into the values
// encoding/json reads, and encodes back to the very bytes stored.
func TestJournalOf053c05e(t *testing.T) {
	f, err := os.Open("testdata/journal-053c05e.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l journalLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		if l.Stream != "PVE" {
			continue // the planner's checkpoints: internal/planloop reads them
		}
		info, err := events.ParseSubject(l.Subject)
		if err != nil {
			t.Fatalf("run %d seq %d: %v", l.Run, l.Seq, err)
		}
		body := []byte(l.Body)
		var what string
		switch info.Kind {
		case events.KindDesired:
			d, err := events.DecodeDesired(body, info.VMID)
			if err != nil {
				t.Fatalf("run %d seq %d: %v", l.Run, l.Seq, err)
			}
			what = sameAsEncodingJSON(t, l, *d, nil)
		case events.KindObserved:
			what = sameAsEncodingJSON(decodeLine[events.Observed](t, l))
		case events.KindAction:
			what = sameAsEncodingJSON(decodeLine[events.Action](t, l))
			a, _ := events.Decode[events.Action](body)
			seen["op "+string(a.Op)]++
		case events.KindResult:
			what = sameAsEncodingJSON(decodeLine[events.Result](t, l))
			r, _ := events.Decode[events.Result](body)
			seen["status "+string(r.Status)]++
		case events.KindHeartbeat:
			what = sameAsEncodingJSON(decodeLine[events.Heartbeat](t, l))
		case events.KindControl:
			what = sameAsEncodingJSON(decodeLine[events.Control](t, l))
		default:
			t.Fatalf("run %d seq %d: kind %q", l.Run, l.Seq, info.Kind)
		}
		seen[what]++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	// The file holds what it says: every kind, and the operations and
	// outcomes a short run with the simulator gives.
	for _, k := range []string{"events.Desired", "events.Observed", "events.Action", "events.Result", "events.Heartbeat", "events.Control",
		"op set_config", "op shutdown", "op start", "op snapshot", "op migrate", "op hold", "op set_pool", "op clone", "op resize", "op destroy",
		"status started", "status succeeded", "status failed"} {
		if seen[k] == 0 {
			t.Errorf("no %s in the journal: %v", k, seen)
		}
	}
}

func decodeLine[T any](t *testing.T, l journalLine) (*testing.T, journalLine, T, error) {
	v, err := events.Decode[T]([]byte(l.Body))
	return t, l, v, err
}

// sameAsEncodingJSON checks a decoded line against encoding/json and its
// re-encoding against the stored bytes; it returns the value's type.
func sameAsEncodingJSON[T any](t *testing.T, l journalLine, v T, err error) string {
	t.Helper()
	if err != nil {
		t.Fatalf("run %d seq %d %s: %v", l.Run, l.Seq, l.Subject, err)
	}
	var want T
	if err := json.Unmarshal([]byte(l.Body), &want); err != nil {
		t.Fatalf("run %d seq %d: encoding/json: %v", l.Run, l.Seq, err)
	}
	if !reflect.DeepEqual(v, want) {
		t.Errorf("run %d seq %d %s: decoded\n%#v\nencoding/json reads\n%#v", l.Run, l.Seq, l.Subject, v, want)
	}
	again, err := events.Encode(v)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, []byte(l.Body)) {
		t.Errorf("run %d seq %d %s: re-encoded\n%s\nstored\n%s", l.Run, l.Seq, l.Subject, again, l.Body)
	}
	return reflect.TypeFor[T]().String()
}
