package events

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// Limits of a desired event and of what is said about a rejected one. A
// body is refused by its size before it is parsed, and a rejection keeps
// at most MaxProblems problems in a reason of at most MaxReasonBytes, so a
// hostile body costs little to refuse and little to report.
const (
	// MaxDesiredBytes is the largest desired event body accepted, 64 KiB:
	// the largest body a well-behaved encoder writes for valid fields
	// (an 8192-character description in 4-byte UTF-8, 64 tags of 128) is
	// about 42 KB. Bodies that escape most characters or carry much
	// whitespace may hit it before their fields' limits.
	MaxDesiredBytes = 64 << 10
	// MaxProblems is the most problems a ValidationError keeps; the rest
	// are counted in a last problem, "… and N more".
	MaxProblems = 10
	// MaxReasonBytes bounds ValidationError.Error(), the reason a guest's
	// status shows for a rejected event.
	MaxReasonBytes = 1 << 10
)

// maxProblemBytes bounds one problem's field and message in a reason (a
// field name may be as long as the body).
const maxProblemBytes = 200

// checkSize refuses a body over MaxDesiredBytes.
func checkSize(body []byte) error {
	if len(body) <= MaxDesiredBytes {
		return nil
	}
	return &ValidationError{Problems: []FieldError{{Message: fmt.Sprintf(
		"body is %d bytes, over the limit of %d bytes (events.MaxDesiredBytes); nothing in it was read", len(body), MaxDesiredBytes)}}}
}

// checkStrict checks what the schema and Go's decoder let through: a key
// given twice in an object (at any depth; Go keeps the last, other readers
// the first), invalid UTF-8 (raw, or a lone surrogate escape; Go replaces
// either with U+FFFD), and anything but exactly one JSON value.
func checkStrict(body []byte) error {
	s := strictPool.Get().(*strictDecoder)
	defer strictPool.Put(s)
	s.r.Reset(body)
	s.dec.Reset(&s.r)
	dec := &s.dec
	_, err := dec.ReadValue()
	if err == nil {
		var tok jsontext.Token
		if tok, err = dec.ReadToken(); err == io.EOF {
			return nil
		} else if err == nil {
			err = fmt.Errorf("a second JSON value (%s) follows the body", tok.Kind())
		}
	}
	return &ValidationError{Problems: []FieldError{strictProblem(err)}}
}

// strictDecoder is reused: a decoder's buffers cost more than checking a
// small body.
type strictDecoder struct {
	r   bytes.Reader
	dec jsontext.Decoder
}

var strictPool = sync.Pool{New: func() any { return new(strictDecoder) }}

func strictProblem(err error) FieldError {
	var se *jsontext.SyntacticError
	if !errors.As(err, &se) {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return FieldError{Message: "body is not valid JSON: " + strings.TrimPrefix(err.Error(), "jsontext: ")}
	}
	field := pointerField(se.JSONPointer)
	msg := se.Err.Error()
	switch {
	case errors.Is(err, jsontext.ErrDuplicateName):
		return FieldError{field, "duplicate key: a key may appear only once in an object"}
	case strings.Contains(msg, "UTF-8") || strings.Contains(msg, "surrogate"):
		return FieldError{field, fmt.Sprintf("invalid UTF-8 at byte %d (%s): text must be valid UTF-8", se.ByteOffset, msg)}
	}
	return FieldError{Message: "body is not valid JSON: " + strings.TrimPrefix(err.Error(), "jsontext: ")}
}

// pointerField turns a JSON pointer (/clone/from, /tags/1) into the
// field names problems use (clone.from, tags.1).
func pointerField(p jsontext.Pointer) string {
	if p == "" {
		return ""
	}
	var parts []string
	for tok := range p.Tokens() {
		parts = append(parts, tok)
	}
	return strings.Join(parts, ".")
}

// capProblems keeps the first MaxProblems problems and counts the rest in
// one more (so a list already capped passes unchanged).
func capProblems(p []FieldError) []FieldError {
	out := p
	if len(p) > MaxProblems+1 {
		out = append(p[:MaxProblems:MaxProblems], FieldError{Message: "… and " + strconv.Itoa(len(p)-MaxProblems) + " more problems"})
	}
	for i, f := range out {
		if len(f.Field) > maxProblemBytes/2 || len(f.Message) > maxProblemBytes {
			if &out[0] == &p[0] {
				out = append([]FieldError(nil), out...)
			}
			out[i] = FieldError{truncate(f.Field, maxProblemBytes/2), truncate(f.Message, maxProblemBytes)}
		}
	}
	return out
}

// truncate cuts s to at most n bytes, at a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// TruncateReason bounds a reason built from event content (a header, an
// error) to MaxReasonBytes, cut at a rune boundary.
func TruncateReason(s string) string {
	return truncate(strings.ToValidUTF8(s, "\uFFFD"), MaxReasonBytes)
}
