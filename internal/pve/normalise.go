package pve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	gojson "github.com/goccy/go-json"
)

// Parsers of Proxmox's wire values (numbers as JSON numbers, strings or
// scientific notation; booleans in every spelling PVE accepts; memory as a
// property string). The normalisers of managed values (tags, description)
// are package events': observer, executor and planner share them.

// ParseFloat reads a JSON number (json.Number, float64, any int type) or a
// numeric string, including scientific notation ("2.048e+03").
func ParseFloat(v any) (float64, error) {
	var s string
	switch x := v.(type) {
	case nil:
		return 0, fmt.Errorf("no value")
	case float64:
		return x, nil
	case float32:
		return float64(x), nil
	case int:
		return float64(x), nil
	case int32:
		return float64(x), nil
	case int64:
		return float64(x), nil
	case uint64:
		return float64(x), nil
	case json.Number:
		s = string(x)
	case string:
		s = x
	case json.RawMessage:
		var inner any
		if err := unmarshalNumber(x, &inner); err != nil {
			return 0, err
		}
		return ParseFloat(inner)
	default:
		return 0, fmt.Errorf("%T is not a number", v)
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	return f, nil
}

// ParseInt reads an integer sent as a JSON number, a numeric string or in
// scientific notation ("1e+10"); fractional values are an error.
func ParseInt(v any) (int64, error) {
	switch x := v.(type) {
	case int:
		return int64(x), nil
	case int64:
		return x, nil
	case int32:
		return int64(x), nil
	case string:
		// Fast path that keeps full int64 precision.
		if n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64); err == nil {
			return n, nil
		}
	case json.Number:
		if n, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return n, nil
		}
	}
	f, err := ParseFloat(v)
	if err != nil {
		return 0, err
	}
	if f != math.Trunc(f) || f > math.MaxInt64 || f < math.MinInt64 {
		return 0, fmt.Errorf("%v is not an integer", v)
	}
	return int64(f), nil
}

// ParseBool reads PVE booleans: 0/1 numbers, "0"/"1", JSON true/false, and
// the spellings PVE accepts on input (yes/no, on/off, true/false). nil (key
// absent) is false.
func ParseBool(v any) (bool, error) {
	switch x := v.(type) {
	case nil:
		return false, nil
	case bool:
		return x, nil
	case string:
		switch strings.ToLower(strings.TrimSpace(x)) {
		case "1", "true", "yes", "on":
			return true, nil
		case "0", "false", "no", "off", "":
			return false, nil
		}
		return false, fmt.Errorf("%q is not a boolean", x)
	}
	n, err := ParseInt(v)
	if err != nil || (n != 0 && n != 1) {
		return false, fmt.Errorf("%v is not a boolean", v)
	}
	return n == 1, nil
}

// ParseMemoryMiB reads a QEMU/LXC memory value in MiB: 2048 (PVE 7 number),
// "2048" (PVE 8+ string), the property string "current=2048[,…]" or
// "2048,…", or scientific notation.
func ParseMemoryMiB(v any) (int, error) {
	if s, ok := v.(string); ok {
		val := ""
		for i, part := range strings.Split(s, ",") {
			part = strings.TrimSpace(part)
			k, pv, hasEq := strings.Cut(part, "=")
			switch {
			case hasEq && strings.TrimSpace(k) == "current":
				val = pv
			case !hasEq && i == 0:
				val = part // the default key may be written without "current="
			}
		}
		if val == "" {
			return 0, fmt.Errorf("memory %q has no current value", s)
		}
		v = val
	}
	n, err := ParseInt(v)
	if err != nil {
		return 0, fmt.Errorf("memory: %w", err)
	}
	if n < 0 || n > math.MaxInt32 {
		return 0, fmt.Errorf("memory %d MiB out of range", n)
	}
	return int(n), nil
}

// unmarshalNumber decodes JSON keeping numbers as json.Number.
func unmarshalNumber(b []byte, v any) (err error) {
	// goccy/go-json gives encoding/json's result (its Number is
	// encoding/json's; TestUnmarshalNumberEquivalent) for less CPU on
	// every read-back, except on invalid UTF-8, which it keeps where
	// encoding/json substitutes U+FFFD and on which its stream decoder
	// was found to panic (FuzzGuestConfig): such an answer is left to
	// encoding/json, and a decoder panic is an error, never a crash.
	if !utf8.Valid(b) {
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		return d.Decode(v)
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed JSON (%v)", r)
		}
	}()
	d := gojson.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return d.Decode(v)
}

// valueString renders a decoded config value as the string PVE would store:
// strings verbatim, numbers canonical (integral scientific notation becomes
// an integer), booleans 0/1. ok is false for null.
func valueString(v any) (s string, ok bool) {
	switch x := v.(type) {
	case nil:
		return "", false
	case string:
		return x, true
	case bool:
		if x {
			return "1", true
		}
		return "0", true
	case json.Number:
		if _, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return string(x), true
		}
		if f, err := strconv.ParseFloat(string(x), 64); err == nil {
			if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
				return strconv.FormatInt(int64(f), 10), true
			}
			return strconv.FormatFloat(f, 'f', -1, 64), true
		}
		return string(x), true
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return fmt.Sprint(x), true
		}
		return string(b), true
	}
}
