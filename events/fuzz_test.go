package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// Seeds are real bodies: what converge desire, the planner and the
// executor write, and the hostile shapes the decoders were hardened against.
var desiredSeeds = []string{
	`{"vmid":101,"power":"running","cores":2,"memory_mib":2048}`,
	`{"vmid":101,"kind":"qemu","power":"stopped","name":"web-1","description":"front","tags":["a","b"],"onboot":true}`,
	`{"vmid":501,"clone":{"from":9000,"node":"pve2","full":true,"storage":"local-lvm"},"power":"running"}`,
	`{"vmid":502,"absent":true}`,
	`{"vmid":101,"cores":2,"cores":64}`,
	`{"vmid":101,"cores":2.0}`,
	`{"vmid":101,"cores":1e1}`,
	`{"vmid":101,"name":"\ud800"}`,
	`{"vmid":101,"tags":["x;y"]}`,
	`{"vmid":101} {"vmid":102}`,
	`[{"vmid":101}]`,
	`{"vmid":-1}`,
	`{"vmid":101,"unknown":1}`,
	"{\"vmid\":101,\"name\":\"\xff\"}",
}

// FuzzDecodeDesired: whatever arrives on pve.desired.*, the decoder either
// accepts a value that survives its own re-encoding unchanged and belongs
// to the subject's guest, or refuses it with a bounded, non-empty reason.
func FuzzDecodeDesired(f *testing.F) {
	for _, s := range desiredSeeds {
		f.Add([]byte(s), 101)
	}
	f.Fuzz(func(t *testing.T, body []byte, vmid int) {
		if fast, ok := fastDecode(body); ok {
			if err := checkStrict(body); err != nil {
				t.Fatalf("fast path accepted what checkStrict refuses (%v): %q", err, body)
			}
			if slow, err := schemaDecode(body); err != nil || !reflect.DeepEqual(fast, slow) {
				t.Fatalf("fast path and schema disagree (%v): %q\n%+v\n%+v", err, body, fast, slow)
			}
		}
		d, err := DecodeDesired(body, vmid)
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) || len(ve.Problems) == 0 {
				t.Fatalf("refused without problems: %T %v", err, err)
			}
			if len(ve.Problems) > MaxProblems+1 || len(err.Error()) > MaxReasonBytes+len(" … and 9999999999 more") {
				t.Fatalf("unbounded reason (%d problems, %d bytes)", len(ve.Problems), len(err.Error()))
			}
			if strings.TrimSpace(err.Error()) == "" {
				t.Fatal("empty reason")
			}
			return
		}
		if vmid != 0 && d.VMID != vmid {
			t.Fatalf("accepted vmid %d on the subject of %d", d.VMID, vmid)
		}
		if d.VMID < MinVMID || d.VMID > MaxVMID {
			t.Fatalf("accepted vmid %d", d.VMID)
		}
		again, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		d2, err := DecodeDesired(again, vmid)
		if err != nil {
			t.Fatalf("an accepted body re-encoded is refused: %v\nbody: %q\nagain: %s", err, body, again)
		}
		if !reflect.DeepEqual(d, d2) {
			t.Fatalf("re-encoding changes the value: %+v vs %+v", d, d2)
		}
	})
}

// roundTrip: what decodes encodes, and from the first encoding on the
// bytes are stable. (Invalid UTF-8 in a string becomes U+FFFD when
// encoded, as encoding/json does, so the first encoding may differ from a
// hostile input; it never differs from itself.)
func roundTrip[T any](t *testing.T, body []byte) {
	v, err := Decode[T](body)
	if err != nil {
		return
	}
	enc, err := Encode(v)
	if err != nil {
		t.Fatalf("a decoded %T does not encode: %v", v, err)
	}
	v2, err := Decode[T](enc)
	if err != nil {
		t.Fatalf("a decoded %T re-encoded does not decode: %v\n%s", v, err, enc)
	}
	enc2, err := Encode(v2)
	if err != nil {
		t.Fatal(err)
	}
	v3, err := Decode[T](enc2)
	if err != nil {
		t.Fatalf("%T: %v\n%s", v, err, enc2)
	}
	if enc3, err := Encode(v3); err != nil || !bytes.Equal(enc2, enc3) {
		t.Fatalf("encoding is not stable: %s vs %s (%v)", enc2, enc3, err)
	}
}

// asEncodingJSON: what Decode accepts, encoding/json accepts too, with the
// same value.
func asEncodingJSON[T any](t *testing.T, body []byte) {
	got, err := Decode[T](body)
	if err != nil {
		return
	}
	var want T
	if err := json.Unmarshal(body, &want); err != nil {
		t.Fatalf("Decode took what encoding/json refuses (%v): %q", err, body)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Decode and encoding/json differ on %q:\n%#v\n%#v", body, got, want)
	}
}

// FuzzDecodeJournal: actions, results, observations, heartbeats and
// control requests as the journal holds them decode without panicking,
// into the values encoding/json gives, and what decodes survives
// re-encoding (replay reads what live wrote).
func FuzzDecodeJournal(f *testing.F) {
	for _, s := range []string{
		`{"id":"a1","vmid":101,"cluster":"default","node":"pve1","kind":"qemu","op":"set_config","set":{"cores":"2"},"delete":["description"],"revert":["memory"],"digest":"ab","reason":"cores 1 → 2","desired_seq":3,"basis_seq":5,"attempt":1,"time":"2026-11-24T06:00:00Z","publisher":"planner"}`,
		`{"id":"a2","vmid":101,"op":"shutdown","timeout_ns":180000000000,"desired_seq":3,"basis_seq":5}`,
		`{"action_id":"a1","vmid":101,"cluster":"default","op":"start","status":"started","upid":"UPID:pve1:0000A1B2:0000C3D4:674A1B2C:qmstart:101:root@pam!converge:","node":"pve1"}`,
		`{"action_id":"a1","vmid":101,"op":"start","status":"failed","error":"got timeout","error_class":"transient","task_log":["x"],"observed":{"vmid":101,"power":"running","config":{"cores":2}}}`,
		`{"vmid":101,"kind":"qemu","node":"pve1","power":"running","config":{"cores":2,"memory_mib":2048,"tags":["a"]},"pending":{"cores":"4"},"digest":"d"}`,
		`{"reachable":true,"interval":1000000000,"time":"2026-11-24T06:00:00Z"}`,
		`{"command":"resync","time":"2026-11-24T06:00:00Z"}`,
		`{"id":"a1","set":{"cores":null}}`,
		`{"timeout_ns":1e400}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		asEncodingJSON[Action](t, body)
		asEncodingJSON[Result](t, body)
		asEncodingJSON[Observed](t, body)
		asEncodingJSON[Heartbeat](t, body)
		asEncodingJSON[Control](t, body)
		roundTrip[Action](t, body)
		roundTrip[Result](t, body)
		roundTrip[Observed](t, body)
		roundTrip[Heartbeat](t, body)
		roundTrip[Control](t, body)
	})
}

// FuzzParseSubject: a subject parses only into what writes it back.
func FuzzParseSubject(f *testing.F) {
	for _, s := range []string{"pve.desired.default.101", "pve.action.default.101.07", "pve.heartbeat.default",
		"pve.control.lab", "pve.desired.default.0101", "pve.result.default.-1", "pve.observed.default.101.x", "pve...",
		"pve.desired.default.101.3.4", "pve.heartbeat.default.101", "pve.desired.default.+101", "pve.desired.default.101."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		info, err := ParseSubject(s)
		if err != nil {
			return
		}
		var back string
		switch {
		case info.VMID == 0:
			back = ClusterSubject(info.Kind, info.Cluster)
		case info.Partition < 0:
			back = Subject(info.Kind, info.Cluster, info.VMID)
		default:
			back = Subject(info.Kind, info.Cluster, info.VMID) + "." + strings.SplitN(s, ".", 5)[4]
		}
		if back != s {
			t.Fatalf("%q parses to %+v, which writes %q", s, info, back)
		}
	})
}

// FuzzNormaliseTags: normalising is idempotent and survives Proxmox's
// string form (what the observer reads back).
func FuzzNormaliseTags(f *testing.F) {
	for _, s := range []string{"a;b", "B,a a", " ;;x", "web;db;web", "ünï;Code", "db;web", "a;a", "b;a", "ǅ;x", "\xff;a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n := NormaliseTags(ParseTags(s))
		if !reflect.DeepEqual(NormaliseTags(n), n) {
			t.Fatalf("not idempotent: %q → %q → %q", s, n, NormaliseTags(n))
		}
		if back := NormaliseTags(ParseTags(FormatTags(n))); !reflect.DeepEqual(back, n) && len(n) > 0 {
			t.Fatalf("%q: %q formats to %q, which parses to %q", s, n, FormatTags(n), back)
		}
		// FormatTags' shortcut for normalised tags changes nothing, for
		// lists split on ';' as for lists split anyhow.
		for _, tags := range [][]string{strings.Split(s, ";"), strings.Split(s, ","), n, {s}} {
			if got, want := FormatTags(tags), strings.Join(NormaliseTags(tags), ";"); got != want {
				t.Fatalf("FormatTags(%q) = %q, want %q", tags, got, want)
			}
		}
		d := NormaliseDescription(s)
		if NormaliseDescription(d) != d {
			t.Fatalf("description not idempotent: %q → %q", s, d)
		}
	})
}

// FuzzDecodeJournal found goccy/go-json's decoder, which Decode used
// before, reading past the end of a body that ends inside an escape
// (panicking or not, depending on the memory behind it). Such a body is
// refused, always.
func TestDecodeTruncatedEscape(t *testing.T) {
	for _, in := range []string{"{\"C\\", "{\"\\", "{\"id\":\"a\\", "{\"reason\":\"\\u12"} {
		if _, err := Decode[Action]([]byte(in)); err == nil {
			t.Errorf("%q decoded", in)
		}
		if _, err := Decode[Result]([]byte(in)); err == nil {
			t.Errorf("%q decoded", in)
		}
	}
}
