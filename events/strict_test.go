package events_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/converge-pve/converge/events"
)

// problems decodes body and returns its problems, failing if it is accepted.
func problems(t *testing.T, body []byte, vmid int) (*events.ValidationError, string) {
	t.Helper()
	d, err := events.DecodeDesired(body, vmid)
	if err == nil {
		t.Fatalf("accepted %.200q as %+v", body, d)
	}
	var ve *events.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v is not a *ValidationError", err)
	}
	return ve, err.Error()
}

// TestDecodeDesiredRejectsDuplicateKeys: a key given twice is refused at
// any level, naming the key: another reader taking the first value would
// see another guest or power state.
func TestDecodeDesiredRejectsDuplicateKeys(t *testing.T) {
	cases := []struct{ name, body, field string }{
		{"vmid twice", `{"vmid":101,"vmid":102}`, "vmid"},
		{"vmid twice, same value", `{"vmid":101,"vmid":101}`, "vmid"},
		{"power twice", `{"vmid":101,"power":"running","power":"stopped"}`, "power"},
		{"escaped duplicate", `{"vmid":101,"na\u006de":"a","name":"b"}`, "name"},
		{"inside clone", `{"vmid":101,"clone":{"from":9000,"from":9001}}`, "clone.from"},
		{"unknown field twice", `{"vmid":101,"x":1,"x":2}`, "x"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ve, reason := problems(t, []byte(c.body), 101)
			if len(ve.Problems) != 1 || ve.Problems[0].Field != c.field || !strings.Contains(ve.Problems[0].Message, "duplicate") {
				t.Fatalf("problems %+v, want one naming duplicate key %q", ve.Problems, c.field)
			}
			if !strings.Contains(reason, c.field) {
				t.Fatalf("reason %q does not name %q", reason, c.field)
			}
		})
	}
}

// TestDecodeDesiredRejectsInvalidUTF8: invalid UTF-8, raw or as a lone
// surrogate escape, is refused, never replaced by U+FFFD.
func TestDecodeDesiredRejectsInvalidUTF8(t *testing.T) {
	cases := []struct{ name, body, field string }{
		{"raw byte in description", "{\"vmid\":101,\"description\":\"caf\xe9\"}", "description"},
		{"truncated sequence in name", "{\"vmid\":101,\"name\":\"web\xe2\x82\"}", "name"},
		{"in a tag", "{\"vmid\":101,\"tags\":[\"ok\",\"b\xffd\"]}", "tags.1"},
		{"in a key", "{\"vmid\":101,\"n\xffme\":\"x\"}", ""},
		{"lone surrogate escape", `{"vmid":101,"description":"a\ud800b"}`, "description"},
		{"lone low surrogate escape", `{"vmid":101,"description":"\udc00"}`, "description"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ve, reason := problems(t, []byte(c.body), 101)
			if len(ve.Problems) != 1 || !strings.Contains(ve.Problems[0].Message, "UTF-8") {
				t.Fatalf("problems %+v, want one about invalid UTF-8", ve.Problems)
			}
			if c.field != "" && ve.Problems[0].Field != c.field {
				t.Fatalf("problem names field %q, want %q", ve.Problems[0].Field, c.field)
			}
			if !utf8.ValidString(reason) {
				t.Fatalf("the reason itself is not valid UTF-8: %q", reason)
			}
		})
	}
	// A valid pair and valid multi-byte text pass.
	if _, err := events.DecodeDesired([]byte(`{"vmid":101,"description":"caf\u00e9 \ud83d\ude00 ☕"}`), 101); err != nil {
		t.Fatalf("valid UTF-8 refused: %v", err)
	}
}

// TestDecodeDesiredRejectsOversizedBody: a body over MaxDesiredBytes is
// refused before it is parsed, with a short reason; one at the limit is
// judged on its content.
func TestDecodeDesiredRejectsOversizedBody(t *testing.T) {
	pad := func(n int) []byte {
		head := `{"vmid":101,"description":"`
		tail := `"}`
		return []byte(head + strings.Repeat(" ", n-len(head)-len(tail)) + tail)
	}
	ve, reason := problems(t, pad(events.MaxDesiredBytes+1), 101)
	if len(ve.Problems) != 1 || !strings.Contains(reason, fmt.Sprint(events.MaxDesiredBytes)) {
		t.Fatalf("reason %q, want one problem naming the limit %d", reason, events.MaxDesiredBytes)
	}
	// At the limit the body is parsed: here the description is too long.
	ve, _ = problems(t, pad(events.MaxDesiredBytes), 101)
	if ve.Problems[0].Field != "description" {
		t.Fatalf("body at the limit: problems %+v, want the description's length", ve.Problems)
	}
	// 770 KB of JSON that is not even valid: the size decides first.
	_, reason = problems(t, []byte(strings.Repeat("{", 770_000)), 101)
	if len(reason) > events.MaxReasonBytes || !strings.Contains(reason, "770000") {
		t.Fatalf("reason (%d bytes) %.300q", len(reason), reason)
	}
}

// unknownFields is a body with n unknown fields after a vmid.
func unknownFields(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"vmid":101`)
	for i := range n {
		fmt.Fprintf(&b, `,"f%d":1`, i)
	}
	b.WriteString("}")
	return []byte(b.String())
}

// TestRejectionReasonIsCapped: a body with thousands of problems yields a
// reason of at most MaxReasonBytes that lists the first problems and says
// how many more there are.
func TestRejectionReasonIsCapped(t *testing.T) {
	for _, n := range []int{5000, 70_000} {
		body := unknownFields(n)
		ve, reason := problems(t, body, 101)
		if len(reason) > events.MaxReasonBytes {
			t.Fatalf("%d unknown fields (%d bytes): reason is %d bytes, cap %d", n, len(body), len(reason), events.MaxReasonBytes)
		}
		if len(ve.Problems) > events.MaxProblems+1 {
			t.Fatalf("%d unknown fields: %d problems kept, want at most %d and a summary", n, len(ve.Problems), events.MaxProblems)
		}
		if len(body) <= events.MaxDesiredBytes {
			if !strings.Contains(reason, "unknown field") || !strings.Contains(reason, fmt.Sprintf("and %d more", n-events.MaxProblems)) {
				t.Fatalf("%d unknown fields: reason %q", n, reason)
			}
		}
	}
	// A huge field name is cut in the reason too.
	ve, reason := problems(t, []byte(`{"vmid":101,"`+strings.Repeat("k", 60_000)+`":1}`), 101)
	if len(reason) > events.MaxReasonBytes || len(ve.Problems[0].Field) > events.MaxReasonBytes {
		t.Fatalf("reason %d bytes, field %d bytes", len(reason), len(ve.Problems[0].Field))
	}
	// A ValidationError built by hand is bounded as well.
	long := &events.ValidationError{Problems: []events.FieldError{{Field: "description", Message: strings.Repeat("é", 5000)}}}
	if s := long.Error(); len(s) > events.MaxReasonBytes || !utf8.ValidString(s) {
		t.Fatalf("hand-built error: %d bytes, valid UTF-8 %v", len(s), utf8.ValidString(s))
	}
}
