package events

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// converge reads and writes its events with one package,
// github.com/go-json-experiment/json (the prototype of encoding/json/v2),
// under option sets joined once rather than on every call.
var (
	// encodeOptions write the bytes encoding/json writes (sorted map keys,
	// HTML-safe escapes, nil slices and maps as null, omitempty as v1,
	// durations in nanoseconds): the journal holds them, and a body
	// written again must be the same (TestEncodeMatchesEncodingJSON).
	encodeOptions = json.JoinOptions(jsonv1.DefaultOptionsV1(), jsontext.AllowInvalidUTF8(false))
	// encodeInvalidUTF8 is Encode's second try, for a value with invalid
	// UTF-8 in a string: encoding/json writes each invalid byte as the
	// escape \ufffd, go-json-experiment as the character U+FFFD itself.
	// Only these rare values pay for the hook.
	encodeInvalidUTF8 = json.JoinOptions(jsonv1.DefaultOptionsV1(), json.WithMarshalers(json.JoinMarshalers(
		escapeInvalid[string](), escapeInvalid[Op](), escapeInvalid[GuestKind](), escapeInvalid[ResultStatus](),
		escapeInvalid[ErrorClass](), escapeInvalid[Power](), escapeInvalid[Restart](), escapeInvalid[Kind](),
		escapeInvalidKeys[string](), escapeInvalidKeys[Disk]())))
	// decodeOptions read as encoding/json reads (unknown members ignored,
	// names matched regardless of case, invalid UTF-8 replaced by U+FFFD,
	// a key given twice keeping its last value), except that a malformed
	// body is refused at its first fault instead of being checked whole
	// first: the check would read every body twice.
	decodeOptions = json.JoinOptions(jsonv1.DefaultOptionsV1(), jsonv1.ReportErrorsWithLegacySemantics(false))
)

// Encode marshals an event body (one of converge's own, or a desired
// state) exactly as encoding/json would (TestEncodeMatchesEncodingJSON).
func Encode(v any) ([]byte, error) {
	b, err := json.Marshal(v, encodeOptions)
	if err != nil {
		b, err = json.Marshal(v, encodeInvalidUTF8)
	}
	return b, err
}

// escapeInvalid writes strings of type T that hold invalid UTF-8 as
// encoding/json does (TestEncodeMatchesEncodingJSON puts some in every
// string of every event type); valid ones are left to the encoder.
func escapeInvalid[T ~string]() *json.Marshalers {
	return json.MarshalToFunc(func(enc *jsontext.Encoder, v T) error {
		if utf8.ValidString(string(v)) {
			return errors.ErrUnsupported // the encoder's own way
		}
		q, err := quoteV1(string(v))
		if err != nil {
			return err
		}
		// A raw string keeps its escapes; the encoder still applies
		// encoding/json's HTML and U+2028/U+2029 escapes to it.
		return enc.WriteValue(q)
	})
}

// escapeInvalidKeys writes a map with a key that holds invalid UTF-8 as
// encoding/json does: ordered by the keys as they are, each written with
// quoteV1 (go-json-experiment orders and writes them as replaced).
func escapeInvalidKeys[V any]() *json.Marshalers {
	return json.MarshalToFunc(func(enc *jsontext.Encoder, m map[string]V) error {
		keys := slices.Sorted(maps.Keys(m))
		if !slices.ContainsFunc(keys, func(k string) bool { return !utf8.ValidString(k) }) {
			return errors.ErrUnsupported
		}
		if err := enc.WriteToken(jsontext.BeginObject); err != nil {
			return err
		}
		for _, k := range keys {
			q, err := quoteV1(k)
			if err != nil {
				return err
			}
			if err := enc.WriteValue(q); err != nil {
				return err
			}
			if err := json.MarshalEncode(enc, m[k]); err != nil {
				return err
			}
		}
		return enc.WriteToken(jsontext.EndObject)
	})
}

// quoteV1 quotes s as encoding/json does, each byte of invalid UTF-8 as
// the escape \ufffd.
func quoteV1(s string) (jsontext.Value, error) {
	b := []byte{'"'}
	for s != "" {
		i := 0
		for i < len(s) {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				break
			}
			i += n
		}
		q, err := jsontext.AppendQuote(nil, s[:i])
		if err != nil {
			return nil, err
		}
		b = append(b, q[1:len(q)-1]...)
		if i < len(s) {
			b = append(b, `\ufffd`...)
			i++
		}
		s = s[i:]
	}
	return append(b, '"'), nil
}

// DecodeStrict unmarshals a request body a caller sent (an operator's
// request over HTTP): exactly one JSON value, member names matched
// exactly, and unknown or duplicate members and invalid UTF-8 refused,
// where the json v1 decoder would replace bad bytes with U+FFFD and
// journal what the caller never sent.
func DecodeStrict[T any](body []byte) (T, error) {
	var v T
	if err := json.Unmarshal(body, &v, strictOptions); err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}

// Decode unmarshals one of converge's own event bodies (actions, results,
// observations, heartbeats, control requests) into the values
// encoding/json gives. Unknown members are ignored, so that an event of a
// newer converge never stops a fold. Every string is copied out of the
// body: the planner keeps each guest's last events, never their bodies.
// On error the zero value is returned.
func Decode[T any](body []byte) (T, error) {
	var v T
	if err := json.Unmarshal(body, &v, decodeOptions); err != nil {
		var zero T
		return zero, fmt.Errorf("events: decode %T: %w", zero, err)
	}
	return v, nil
}
