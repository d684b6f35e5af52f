package events

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"pgregory.net/rapid"
)

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

func genMeta(t *rapid.T) Meta {
	return Meta{Schema: rapid.IntRange(0, 2).Draw(t, "schema"), Publisher: genString(t, "publisher"),
		CorrelationID: genString(t, "correlation"), Time: genTime(t, "time")}
}

func genObservedFull(t *rapid.T) *Observed {
	o := &Observed{Meta: genMeta(t), VMID: rapid.Int().Draw(t, "vmid"), Cluster: genString(t, "cluster"),
		Exists: rapid.Bool().Draw(t, "exists"), Node: genString(t, "node"), Kind: GuestKind(genString(t, "kind")),
		Status: genString(t, "status"), Lock: genString(t, "lock"), Template: rapid.Bool().Draw(t, "template"),
		Digest: genString(t, "digest"), Protected: rapid.Bool().Draw(t, "protected"), HA: genString(t, "ha"),
		Pool: genString(t, "pool"), Pending: genMap(t, "pending"), ReadAt: genTime(t, "read_at"),
		Source: genString(t, "source"), AfterSeq: rapid.Uint64().Draw(t, "after_seq")}
	c := &o.Config
	c.Name, c.Description, c.Tags = genString(t, "name"), genString(t, "description"), genStrings(t, "tags")
	c.Cores, c.MemoryMiB, c.OnBoot = rapid.Int().Draw(t, "cores"), rapid.Int().Draw(t, "memory"), rapid.Bool().Draw(t, "onboot")
	c.Net, c.CloudInit, c.Hotplug, c.NUMA = genMap(t, "net"), genMap(t, "cloudinit"), genString(t, "hotplug"), rapid.Bool().Draw(t, "numa")
	if rapid.Bool().Draw(t, "has-disks") {
		c.Disks = map[string]Disk{}
		for i := range rapid.IntRange(0, 3).Draw(t, "disks") {
			c.Disks[genString(t, "disk-key")+string(rune('0'+i))] = Disk{Volume: genString(t, "volume"),
				SizeBytes: rapid.Int64().Draw(t, "size"), Media: genString(t, "media")}
		}
	}
	return o
}

func genAction(t *rapid.T) *Action {
	a := &Action{Meta: genMeta(t), ID: genString(t, "id"), VMID: rapid.Int().Draw(t, "vmid"), Cluster: genString(t, "cluster"),
		Node: genString(t, "node"), Kind: GuestKind(genString(t, "kind")), Op: Op(genString(t, "op")), Set: genMap(t, "set"),
		Delete: genStrings(t, "delete"), Revert: genStrings(t, "revert"), Holds: Op(genString(t, "holds")),
		HAState: genString(t, "ha_state"), Digest: genString(t, "digest"),
		Timeout: time.Duration(rapid.Int64().Draw(t, "timeout")), Reason: genString(t, "reason"),
		DesiredSeq: rapid.Uint64().Draw(t, "desired_seq"), BasisSeq: rapid.Uint64().Draw(t, "basis_seq"),
		ObservationSeq: rapid.Uint64().Draw(t, "observation_seq"), FoldSeq: rapid.Uint64().Draw(t, "fold_seq"),
		Attempt: rapid.Int().Draw(t, "attempt")}
	if rapid.Bool().Draw(t, "has-clone") {
		a.Clone = &CloneOp{From: rapid.Int().Draw(t, "from"), FromNode: genString(t, "from_node"), Full: rapid.Bool().Draw(t, "full"),
			Storage: genString(t, "storage"), Pool: genString(t, "clone-pool"), Name: genString(t, "clone-name"),
			SourceStorage: genString(t, "source_storage")}
	}
	if rapid.Bool().Draw(t, "has-resize") {
		a.Resize = &ResizeOp{Disk: genString(t, "resize-disk"), SizeGiB: rapid.Int64().Draw(t, "size_gib")}
	}
	if rapid.Bool().Draw(t, "has-migrate") {
		a.Migrate = &MigrateOp{Target: genString(t, "target"), Online: rapid.Bool().Draw(t, "online"),
			Restart: rapid.Bool().Draw(t, "restart"), HA: rapid.Bool().Draw(t, "migrate-ha")}
	}
	if rapid.Bool().Draw(t, "has-pool") {
		a.Pool = &PoolOp{From: genString(t, "pool-from"), To: genString(t, "pool-to"), Create: rapid.Bool().Draw(t, "create")}
	}
	if rapid.Bool().Draw(t, "has-snapshot") {
		a.Snapshot = &SnapshotOp{Name: genString(t, "snapshot-name"), Before: Op(genString(t, "before")), Keep: rapid.Int().Draw(t, "keep")}
	}
	return a
}

func genResult(t *rapid.T) *Result {
	r := &Result{Meta: genMeta(t), ActionID: genString(t, "action_id"), VMID: rapid.Int().Draw(t, "vmid"),
		Cluster: genString(t, "cluster"), Op: Op(genString(t, "op")), Status: ResultStatus(genString(t, "status")),
		UPID: genString(t, "upid"), Node: genString(t, "node"), Error: genString(t, "error"),
		ErrorClass: ErrorClass(genString(t, "error_class")), Warnings: rapid.Int().Draw(t, "warnings"),
		TaskLog: genStrings(t, "task_log"), Reason: genString(t, "reason"), Executor: genString(t, "executor")}
	if rapid.Bool().Draw(t, "has-observed") {
		r.Observed = genObservedFull(t)
	}
	return r
}

// agree checks that body, when the typed decoder takes it, decodes to
// what encoding/json and Decode's general path make of it.
func agree[T any](t interface {
	Helper()
	Fatalf(string, ...any)
}, body []byte) bool {
	t.Helper()
	var fast T
	if !decodeFast(&fast, body) {
		return false
	}
	var std T
	if err := json.Unmarshal(body, &std); err != nil {
		t.Fatalf("typed decoder took what encoding/json refuses (%v):\n%q", err, body)
	}
	if !reflect.DeepEqual(fast, std) {
		t.Fatalf("typed decoder and encoding/json differ:\n%#v\n%#v\nbody %q", fast, std, body)
	}
	general, err := decodeGeneral[T](body)
	if err != nil || !reflect.DeepEqual(fast, general) {
		t.Fatalf("typed decoder and the general path differ (%v):\n%#v\n%#v\nbody %q", err, fast, general, body)
	}
	return true
}

// TestFastDecodeAgrees: whatever converge writes (encoding/json and
// Encode), the typed decoders read, and they read it exactly as
// encoding/json and the general path do.
func TestFastDecodeAgrees(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var v any
		switch rapid.IntRange(0, 2).Draw(t, "type") {
		case 0:
			v = genAction(t)
		case 1:
			v = genResult(t)
		default:
			v = genObservedFull(t)
		}
		for _, enc := range []func(any) ([]byte, error){json.Marshal, Encode} {
			body, err := enc(v)
			if err != nil {
				t.Fatal(err)
			}
			var took bool
			switch v.(type) {
			case *Action:
				took = agree[Action](t, body)
			case *Result:
				took = agree[Result](t, body)
			case *Observed:
				took = agree[Observed](t, body)
			}
			if !took {
				t.Fatalf("typed decoder refused what converge writes: %s", body)
			}
		}
	})
}

// FuzzFastDecode: whatever a body holds, the typed decoders either leave
// it to the general path or read it as encoding/json and the general
// path do.
func FuzzFastDecode(f *testing.F) {
	for _, s := range []string{
		`{"id":"a1","vmid":101,"cluster":"pve","node":"pve1","kind":"qemu","op":"set_config","set":{"cores":"2"},"delete":["description"],"revert":[],"digest":"ab","reason":"cores 1 → 2","desired_seq":3,"basis_seq":5,"attempt":1,"time":"2026-11-24T06:00:00Z","publisher":"planner"}`,
		`{"id":"a2","vmid":101,"op":"shutdown","timeout_ns":180000000000,"clone":{"from":9000,"full":true},"resize":null,"migrate":{"target":"pve2","online":true},"pool":{"to":"p"},"snapshot":{"name":"s","before":"resize","keep":2}}`,
		`{"action_id":"a1","vmid":101,"op":"start","status":"failed","error":"got \"timeout\"\n","error_class":"transient","task_log":["x"],"observed":{"vmid":101,"config":{"cores":2,"tags":null,"disks":{"scsi0":{"volume":"l:v","size_bytes":8589934592}}}}}`,
		`{"vmid":101,"kind":"qemu","node":"pve1","status":"running","config":{"cores":2,"memory_mib":2048,"tags":["a"],"net":{"net0":"virtio=X"},"cloudinit":{}},"pending":{"cores":"4"},"digest":"d","read_at":"2026-11-24T06:00:00.123456789+02:00","after_seq":18446744073709551615}`,
		`{"vmid":101,"VMID":102}`, `{"vmid":1.0}`, `{"vmid":-0}`, `{"vmid":01}`, `{"after_seq":-1}`, `{"name":"\ud83d\ude00\ud800"}`,
		`{"x":[1,{"y":[true,false,null,-1.5e+3,"\u00e9"]}],"vmid":7}`, `{"vmid":1,}`, `{"vmid":1} x`, ` {"vmid":1} `, `null`, `{"config":null}`,
		"{\"node\":\"\xff\"}", `{"node":"a\/b\u0041"}`, `{"time":"2026-11-24T06:00:00Z","time":"bad"}`, `{"set":{"a":"1"},"set":{"b":"2"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		agree[Action](t, body)
		agree[Result](t, body)
		agree[Observed](t, body)
	})
}
