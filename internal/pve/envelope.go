package pve

import (
	"encoding/json"

	gojson "github.com/goccy/go-json"
)

// envelopeData returns what go-proxmox would decode from an answer: the
// "data" member of the top-level object (the whole body if it has none),
// nothing for null, and encoding/json's error for a malformed body. The
// member is a slice of body, not a copy: every Proxmox answer passes
// here, and a config read's data is nearly all of it.
func envelopeData(body []byte) (json.RawMessage, error) {
	d, ok := []byte(nil), false
	// goccy/go-json skips some malformed JSON that encoding/json (and so
	// go-proxmox) refuses: the body is checked with the standard scanner,
	// and any doubt falls back to encoding/json, whose errors Classify
	// knows.
	if json.Valid(body) {
		d, ok = dataMember(body)
	}
	if !ok {
		var env map[string]json.RawMessage
		if !json.Valid(body) || gojson.Unmarshal(body, &env) != nil {
			env = nil
			if err := json.Unmarshal(body, &env); err != nil {
				return nil, err
			}
		}
		if d, ok = env["data"]; !ok {
			d = body
		}
	}
	if isNull(d) {
		return nil, nil
	}
	return d, nil
}

// dataMember finds, in a body that json.Valid accepts, the top-level
// object's "data" member as a map decode does (the last one if there are
// several; body itself if there is none). ok is false where it cannot be
// as sure: a body that is not an object, or a key written with escapes
// (which may spell "data").
func dataMember(b []byte) (d []byte, ok bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false
	}
	d = b
	for i = skipSpace(b, i+1); i < len(b) && b[i] != '}'; {
		if b[i] != '"' {
			return nil, false
		}
		end := i + 1
		for end < len(b) && b[end] != '"' {
			if b[end] == '\\' {
				return nil, false
			}
			end++
		}
		key := b[i+1 : min(end, len(b))]
		i = skipSpace(b, end+1)
		if i >= len(b) || b[i] != ':' {
			return nil, false
		}
		start := skipSpace(b, i+1)
		if i, ok = skipValue(b, start); !ok {
			return nil, false
		}
		if string(key) == "data" {
			d = b[start:i]
		}
		if i = skipSpace(b, i); i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	return d, i < len(b)
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns where the valid JSON value at b[i] ends.
func skipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				j, ok := skipString(b, i)
				if !ok {
					return j, false
				}
				i = j - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1, true
				}
			}
		}
		return i, false
	default: // a number, true, false or null: up to the next delimiter
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i, true
			}
			i++
		}
		return i, true
	}
}

// skipString returns where the string starting at b[i] ends.
func skipString(b []byte, i int) (int, bool) {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1, true
		}
	}
	return i, false
}
