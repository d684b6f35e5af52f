package events_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/converge-pve/converge/events"
)

// Generators of the journal's event types, every field drawn, for the
// property tests that hold Encode and Decode to encoding/json.

// Strings that exercise escapes, HTML characters, non-ASCII and what
// encoding/json rewrites (invalid UTF-8, lone surrogates never reach a
// body it writes).
var trickyStrings = []string{"", "a", "web-1", "Ünïcödé 😀", "quote\" back\\slash /", "<b>&amp;</b>", "line\nbreak\ttab\r",
	"\u2028\u2029", "nul\x00byte", "bad \xff utf-8", "config drift: cores 1 → 2", "UPID:pve1:0000A1B2:0000C3D4:674A1B2C:qmstart:101:root@pam!converge:"}

func genString(t *rapid.T, label string) string {
	if rapid.IntRange(0, 3).Draw(t, label+"-tricky") == 0 {
		return rapid.SampledFrom(trickyStrings).Draw(t, label)
	}
	return rapid.String().Draw(t, label)
}

func genStrings(t *rapid.T, label string) []string {
	switch rapid.IntRange(0, 2).Draw(t, label+"-shape") {
	case 0:
		return nil
	case 1:
		return []string{}
	}
	return rapid.SliceOfN(rapid.Custom(func(t *rapid.T) string { return genString(t, label+"-elem") }), 1, 4).Draw(t, label)
}

func genMap(t *rapid.T, label string) map[string]string {
	switch rapid.IntRange(0, 2).Draw(t, label+"-shape") {
	case 0:
		return nil
	case 1:
		return map[string]string{}
	}
	m := map[string]string{}
	for i := range rapid.IntRange(1, 3).Draw(t, label+"-len") {
		m[genString(t, label+"-key")+string(rune('a'+i))] = genString(t, label+"-value")
	}
	return m
}

func genTime(t *rapid.T, label string) time.Time {
	if rapid.IntRange(0, 4).Draw(t, label+"-zero") == 0 {
		return time.Time{}
	}
	at := time.Unix(rapid.Int64Range(0, 4e9).Draw(t, label+"-s"), rapid.Int64Range(0, 999999999).Draw(t, label+"-ns"))
	if rapid.Bool().Draw(t, label+"-utc") {
		return at.UTC()
	}
	return at.In(time.FixedZone("", rapid.IntRange(-12, 14).Draw(t, label+"-zone")*3600))
}

func genMeta(t *rapid.T) events.Meta {
	return events.Meta{Schema: rapid.IntRange(0, 2).Draw(t, "schema"), Publisher: genString(t, "publisher"),
		CorrelationID: genString(t, "correlation"), Time: genTime(t, "time")}
}

func genObservedFull(t *rapid.T) *events.Observed {
	o := &events.Observed{Meta: genMeta(t), VMID: rapid.Int().Draw(t, "vmid"), Cluster: genString(t, "cluster"),
		Exists: rapid.Bool().Draw(t, "exists"), Node: genString(t, "node"), Kind: events.GuestKind(genString(t, "kind")),
		Status: genString(t, "status"), Lock: genString(t, "lock"), Template: rapid.Bool().Draw(t, "template"),
		Digest: genString(t, "digest"), Protected: rapid.Bool().Draw(t, "protected"), HA: genString(t, "ha"),
		Pool: genString(t, "pool"), Pending: genMap(t, "pending"), ReadAt: genTime(t, "read_at"),
		Source: genString(t, "source"), AfterSeq: rapid.Uint64().Draw(t, "after_seq")}
	c := &o.Config
	c.Name, c.Description, c.Tags = genString(t, "name"), genString(t, "description"), genStrings(t, "tags")
	c.Cores, c.MemoryMiB, c.OnBoot = rapid.Int().Draw(t, "cores"), rapid.Int().Draw(t, "memory"), rapid.Bool().Draw(t, "onboot")
	c.Net, c.CloudInit, c.Hotplug, c.NUMA = genMap(t, "net"), genMap(t, "cloudinit"), genString(t, "hotplug"), rapid.Bool().Draw(t, "numa")
	if rapid.Bool().Draw(t, "has-disks") {
		c.Disks = map[string]events.Disk{}
		for i := range rapid.IntRange(0, 3).Draw(t, "disks") {
			c.Disks[genString(t, "disk-key")+string(rune('0'+i))] = events.Disk{Volume: genString(t, "volume"),
				SizeBytes: rapid.Int64().Draw(t, "size"), Media: genString(t, "media")}
		}
	}
	return o
}

func genAction(t *rapid.T) *events.Action {
	a := &events.Action{Meta: genMeta(t), ID: genString(t, "id"), VMID: rapid.Int().Draw(t, "vmid"), Cluster: genString(t, "cluster"),
		Node: genString(t, "node"), Kind: events.GuestKind(genString(t, "kind")), Op: events.Op(genString(t, "op")), Set: genMap(t, "set"),
		Delete: genStrings(t, "delete"), Revert: genStrings(t, "revert"), Holds: events.Op(genString(t, "holds")),
		HAState: genString(t, "ha_state"), Digest: genString(t, "digest"),
		Timeout: time.Duration(rapid.Int64().Draw(t, "timeout")), Reason: genString(t, "reason"),
		DesiredSeq: rapid.Uint64().Draw(t, "desired_seq"), BasisSeq: rapid.Uint64().Draw(t, "basis_seq"),
		ObservationSeq: rapid.Uint64().Draw(t, "observation_seq"), FoldSeq: rapid.Uint64().Draw(t, "fold_seq"),
		Attempt: rapid.Int().Draw(t, "attempt")}
	if rapid.Bool().Draw(t, "has-clone") {
		a.Clone = &events.CloneOp{From: rapid.Int().Draw(t, "from"), FromNode: genString(t, "from_node"), Full: rapid.Bool().Draw(t, "full"),
			Storage: genString(t, "storage"), Pool: genString(t, "clone-pool"), Name: genString(t, "clone-name"),
			SourceStorage: genString(t, "source_storage")}
	}
	if rapid.Bool().Draw(t, "has-resize") {
		a.Resize = &events.ResizeOp{Disk: genString(t, "resize-disk"), SizeGiB: rapid.Int64().Draw(t, "size_gib")}
	}
	if rapid.Bool().Draw(t, "has-migrate") {
		a.Migrate = &events.MigrateOp{Target: genString(t, "target"), Online: rapid.Bool().Draw(t, "online"),
			Restart: rapid.Bool().Draw(t, "restart"), HA: rapid.Bool().Draw(t, "migrate-ha")}
	}
	if rapid.Bool().Draw(t, "has-pool") {
		a.Pool = &events.PoolOp{From: genString(t, "pool-from"), To: genString(t, "pool-to"), Create: rapid.Bool().Draw(t, "create")}
	}
	if rapid.Bool().Draw(t, "has-snapshot") {
		a.Snapshot = &events.SnapshotOp{Name: genString(t, "snapshot-name"), Before: events.Op(genString(t, "before")), Keep: rapid.Int().Draw(t, "keep")}
	}
	return a
}

func genResult(t *rapid.T) *events.Result {
	r := &events.Result{Meta: genMeta(t), ActionID: genString(t, "action_id"), VMID: rapid.Int().Draw(t, "vmid"),
		Cluster: genString(t, "cluster"), Op: events.Op(genString(t, "op")), Status: events.ResultStatus(genString(t, "status")),
		UPID: genString(t, "upid"), Node: genString(t, "node"), Error: genString(t, "error"),
		ErrorClass: events.ErrorClass(genString(t, "error_class")), Warnings: rapid.Int().Draw(t, "warnings"),
		TaskLog: genStrings(t, "task_log"), Reason: genString(t, "reason"), Executor: genString(t, "executor")}
	if rapid.Bool().Draw(t, "has-observed") {
		r.Observed = genObservedFull(t)
	}
	return r
}

// agree checks that body, when the typed decoder takes it, decodes to

func genHeartbeat(t *rapid.T) *events.Heartbeat {
	h := &events.Heartbeat{Meta: genMeta(t), Cluster: genString(t, "cluster"), Observer: genString(t, "observer"),
		Reachable: rapid.Bool().Draw(t, "reachable"), Error: genString(t, "error"), Pass: rapid.Uint64().Draw(t, "pass"),
		Guests: rapid.Int().Draw(t, "guests"), Interval: time.Duration(rapid.Int64().Draw(t, "interval")),
		VerifyPeriod: time.Duration(rapid.Int64().Draw(t, "verify_period")), AfterSeq: rapid.Uint64().Draw(t, "after_seq")}
	if rapid.Bool().Draw(t, "has-unread") {
		h.Unread = rapid.SliceOf(rapid.Int()).Draw(t, "unread")
	}
	return h
}

func genControl(t *rapid.T) *events.Control {
	c := &events.Control{Meta: genMeta(t), Command: genString(t, "command"), All: rapid.Bool().Draw(t, "all")}
	if rapid.Bool().Draw(t, "has-vmids") {
		c.VMIDs = rapid.SliceOf(rapid.Int()).Draw(t, "vmids")
	}
	return c
}

// agree checks that Decode reads body into what encoding/json reads.
func agree[T any](t *rapid.T, body []byte) {
	got, err := events.Decode[T](body)
	if err != nil {
		t.Fatalf("Decode refused what converge writes (%v):\n%s", err, body)
	}
	var want T
	if err := json.Unmarshal(body, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Decode and encoding/json differ:\n%#v\n%#v\nbody %s", got, want, body)
	}
}

// TestCodecAgreesWithEncodingJSON: for whatever converge writes, Encode
// writes encoding/json's bytes and Decode reads encoding/json's values.
func TestCodecAgreesWithEncodingJSON(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var v any
		switch rapid.IntRange(0, 4).Draw(t, "type") {
		case 0:
			v = genAction(t)
		case 1:
			v = genResult(t)
		case 2:
			v = genObservedFull(t)
		case 3:
			v = genHeartbeat(t)
		default:
			v = genControl(t)
		}
		body, err := events.Encode(v)
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := json.Marshal(v); !bytes.Equal(body, want) {
			t.Fatalf("Encode and encoding/json differ:\n%s\n%s", body, want)
		}
		switch v.(type) {
		case *events.Action:
			agree[events.Action](t, body)
		case *events.Result:
			agree[events.Result](t, body)
		case *events.Observed:
			agree[events.Observed](t, body)
		case *events.Heartbeat:
			agree[events.Heartbeat](t, body)
		case *events.Control:
			agree[events.Control](t, body)
		}
	})
}
