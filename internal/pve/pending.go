package pve

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// decodePendingItems decodes the data of GET …/pending as
// unmarshalNumber does (numbers as json.Number), without a general
// decoder for the common answer: a flat array of objects whose members
// are scalars and whose keys and strings carry no escapes. Every read of
// a guest's config passes here; the general decode cost the latency run
// about 3 KB a change in its stream decoder and boxed values.
func decodePendingItems(b []byte) ([]pendingItem, error) {
	if items, ok := pendingInPlace(b); ok {
		return items, nil
	}
	var items []pendingItem
	err := unmarshalNumber(b, &items)
	return items, err
}

// pendingInPlace is decodePendingItems' fast path; ok is false wherever it
// is not sure to decode as encoding/json would (escapes, nested values,
// field names in another case, anything not valid JSON or UTF-8).
func pendingInPlace(b []byte) (items []pendingItem, ok bool) {
	if !utf8.Valid(b) || !json.Valid(b) {
		return nil, false
	}
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return nil, false
	}
	items = []pendingItem{}
	for i = skipSpace(b, i+1); i < len(b) && b[i] != ']'; {
		if b[i] != '{' {
			return nil, false
		}
		var it pendingItem
		for i = skipSpace(b, i+1); i < len(b) && b[i] != '}'; {
			key, end, ok := plainString(b, i)
			if !ok {
				return nil, false
			}
			i = skipSpace(b, end)
			if i >= len(b) || b[i] != ':' {
				return nil, false
			}
			i = skipSpace(b, i+1)
			v, end, ok := scalar(b, i)
			if !ok {
				return nil, false
			}
			switch key {
			case "key":
				switch s := v.(type) {
				case string:
					it.Key = s
				case nil: // null leaves a string as it is
				default:
					return nil, false // encoding/json's type error
				}
			case "value":
				it.Value = v
			case "pending":
				it.Pending = v
			case "delete":
				it.Delete = v
			default:
				if foldsToField(key) {
					return nil, false // matched case-insensitively by encoding/json
				}
			}
			if i = skipSpace(b, end); i < len(b) && b[i] == ',' {
				i = skipSpace(b, i+1)
			}
		}
		items = append(items, it)
		if i = skipSpace(b, i+1); i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	return items, i < len(b)
}

// foldsToField: a member name pendingItem's fields would take in another
// case.
func foldsToField(k string) bool {
	for _, f := range [...]string{"key", "value", "pending", "delete"} {
		if len(k) == len(f) && equalFoldASCII(k, f) {
			return true
		}
	}
	return false
}

func equalFoldASCII(a, b string) bool {
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if x >= 'A' && x <= 'Z' {
			x += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// plainString reads the string at b[i] if it has no escapes.
func plainString(b []byte, i int) (s string, end int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return "", i, false
	}
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			return "", j, false
		case '"':
			return string(b[i+1 : j]), j + 1, true
		}
	}
	return "", len(b), false
}

// scalar reads the scalar at b[i] as unmarshalNumber would into an any:
// a string, a json.Number, a bool or nil. ok is false for an object, an
// array or a string with escapes.
func scalar(b []byte, i int) (v any, end int, ok bool) {
	if i >= len(b) {
		return nil, i, false
	}
	switch b[i] {
	case '"':
		return plainString(b, i)
	case '{', '[':
		return nil, i, false
	}
	end, ok = skipValue(b, i)
	if !ok {
		return nil, end, false
	}
	switch t := string(b[i:end]); t {
	case "null":
		return nil, end, true
	case "true":
		return true, end, true
	case "false":
		return false, end, true
	default:
		// goccy's decoder refuses a number out of float64's range even
		// into a json.Number: left to it, for its error.
		if _, err := strconv.ParseFloat(t, 64); err != nil {
			return nil, end, false
		}
		return json.Number(t), end, true
	}
}
