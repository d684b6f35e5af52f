package planloop

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/projector"
)

// benchSnapshot is a fold of guests converged guests, each with a
// desired state, a read-back with disks and an interface, its last
// action and result.
func benchSnapshot(guests int) *projector.Snapshot {
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	p := projector.New("pve")
	seq := uint64(0)
	add := func(kind events.Kind, vmid int, body []byte) {
		seq++
		p.Apply(projector.Event{Seq: seq, Subject: events.StoredSubject(kind, "pve", vmid, 16), Data: body, Time: t0})
	}
	for vmid := 100; vmid < 100+guests; vmid++ {
		add(events.KindDesired, vmid, []byte(fmt.Sprintf(`{"vmid":%d,"power":"running","cores":2,"memory_mib":2048,"description":"web frontend","tags":["prod","web"]}`, vmid)))
		ds := seq
		a := events.Action{Meta: events.NewMeta("planner@host", fmt.Sprintf("desired-pve-%d-%d", vmid, ds), t0), ID: fmt.Sprintf("pve-%d-%d-1", vmid, ds),
			VMID: vmid, Cluster: "pve", Node: "pve1", Kind: events.QEMU, Op: events.OpSetConfig, Set: map[string]string{"description": "web frontend"},
			Reason: "config drift: description", DesiredSeq: ds, BasisSeq: ds, Attempt: 1}
		body, _ := json.Marshal(a)
		add(events.KindAction, vmid, body)
		o := events.Observed{Meta: events.NewMeta("executor@host", "", t0), VMID: vmid, Cluster: "pve", Exists: true, Node: "pve1",
			Kind: events.QEMU, Status: "running", Digest: fmt.Sprintf("%040x", vmid), ReadAt: t0, Source: events.SourceExecutor,
			Config: events.GuestConfig{Name: fmt.Sprintf("vm-%d", vmid), Description: "web frontend", Tags: []string{"prod", "web"}, Cores: 2, MemoryMiB: 2048,
				Disks: map[string]events.Disk{"scsi0": {Volume: fmt.Sprintf("local-lvm:vm-%d-disk-0", vmid), SizeBytes: 8 << 30}},
				Net:   map[string]string{"net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0"}}}
		body, _ = json.Marshal(events.Result{Meta: a.Meta, ActionID: a.ID, VMID: vmid, Cluster: "pve", Op: a.Op, Status: events.ResultSucceeded,
			Node: "pve1", Observed: &o, Executor: "executor@host"})
		add(events.KindResult, vmid, body)
	}
	return p.Snapshot()
}

// BenchmarkCheckpointEncode encodes and compresses a checkpoint of
// 100,000 guests, as a planner does every CheckpointInterval (off its
// loop, but on the host's processors and heap).
func BenchmarkCheckpointEncode(b *testing.B) {
	s := benchSnapshot(100000)
	cp := &Checkpoint{Snapshot: *s, Stream: "PVE", StreamCreated: time.Now(), At: time.Now()}
	var size int
	b.ReportAllocs()
	for b.Loop() {
		packed, err := encodeCheckpoint(cp)
		if err != nil {
			b.Fatal(err)
		}
		size = len(packed)
	}
	b.ReportMetric(float64(size)/1e6, "stored-MB")
}

// TestCheckpointEncodeRoundTrip: a checkpoint streamed view by view is
// the JSON encoding/json writes for it, and decodes to what it holds, for
// an empty fold too; so does one as older planners wrote it (a newline
// after each view) or spaced out, compressed or not.
func TestCheckpointEncodeRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	for _, guests := range []int{0, 1, 50} {
		s := benchSnapshot(guests)
		s.State.Error = `a "views":null in a string`
		cp := &Checkpoint{Snapshot: *s, Stream: "PVE", StreamCreated: at, At: at.Add(time.Minute)}
		packed, err := encodeCheckpoint(cp)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(cp)
		if plain, err := zstdDecoder.DecodeAll(packed, nil); err != nil || string(plain) != string(want) {
			t.Fatalf("%d guests: stored JSON is not encoding/json's (%v):\n got %s\nwant %s", guests, err, plain, want)
		}
		spaced, _ := json.MarshalIndent(cp, "", "\t")
		zw, _ := zstd.NewWriter(nil)
		for _, body := range [][]byte{packed, spaced, zw.EncodeAll(spaced, nil)} {
			got, why := decodeCheckpoint(body)
			if why != "" {
				t.Fatalf("%d guests: %s", guests, why)
			}
			if have, _ := json.Marshal(got); string(want) != string(have) {
				t.Fatalf("%d guests: decoded checkpoint differs:\n got %s\nwant %s", guests, have, want)
			}
		}
	}
}

// TestCheckpointsOf053c05e: the checkpoints a planner of commit 053c05e
// stored (events/testdata/journal-053c05e.jsonl, made as its README says)
// decode into what encoding/json reads from them, and encode again to
// encoding/json's JSON of that. (Not to the stored bytes: goccy/go-json
// wrote a newline after each view and ignored omitzero, writing zero
// times that encoding/json and this planner leave out.)
func TestCheckpointsOf053c05e(t *testing.T) {
	raw, err := os.ReadFile("../../events/testdata/journal-053c05e.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for line := range bytes.Lines(raw) {
		var l struct {
			Stream string `json:"stream"`
			Object string `json:"object"`
			Body   []byte `json:"body_base64"`
		}
		if err := json.Unmarshal(line, &l); err != nil {
			t.Fatal(err)
		}
		if l.Stream != "OBJ_converge_checkpoints" {
			continue
		}
		n++
		cp, why := decodeCheckpoint(l.Body)
		if why != "" {
			t.Fatalf("checkpoint %d: %s", n, why)
		}
		plain, err := zstdDecoder.DecodeAll(l.Body, nil)
		if err != nil {
			t.Fatal(err)
		}
		var want Checkpoint
		if err := json.Unmarshal(plain, &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(*cp, want) {
			t.Errorf("checkpoint %d decodes to\n%+v\nencoding/json reads\n%+v", n, *cp, want)
		}
		packed, err := encodeCheckpoint(cp)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := zstdDecoder.DecodeAll(packed, nil)
		if std, _ := json.Marshal(cp); !bytes.Equal(again, std) {
			t.Errorf("checkpoint %d encodes to\n%s\nencoding/json writes\n%s", n, again, std)
		}
	}
	if n == 0 {
		t.Fatal("no checkpoint in the journal's testdata")
	}
}
