package pve

import (
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// Value is one member of a Proxmox answer, as Proxmox wrote it. Proxmox's
// typing is mixed: Perl writes a scalar as a JSON number or as a string
// depending on how it was last used, so a member is a number on one
// endpoint or version and a string on another (a config's memory is 2048
// on PVE 7 and "2048" since; cpulimit is "0.5"; a list may carry vmid
// "101"), integers may come in scientific notation (2.048e+03), and
// booleans come as 0/1, "0"/"1" or true/false. The typed answers of this
// package read such members into a Value and take the Go type they need
// from it ([Value.Int], [Value.Float], [Value.Bool], [Value.Text]), so that
// no typing Proxmox chooses fails a read. The zero Value is an absent or
// null member.
type Value struct {
	text string  // a string's contents; a number beyond float64; a nested value's JSON
	num  float64 // a number's value
	int  int64   // a number's value when it is an integer that int64 holds
	kind valueKind
}

type valueKind uint8

const (
	kindNull   valueKind = iota
	kindString           // text
	kindInt              // int, and num
	kindFloat            // num: a number with a fraction or exponent, or beyond int64
	kindHuge             // text: a number beyond float64's range
	kindTrue
	kindFalse
	kindJSON // text: an object or array, compacted
)

// UnmarshalJSONFrom reads one JSON value of any kind; it never fails on
// valid JSON.
func (v *Value) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	raw, err := dec.ReadValue()
	if err != nil {
		return err
	}
	*v = valueOf(raw)
	return nil
}

// valueOf reads a raw JSON value the decoder has checked.
func valueOf(raw jsontext.Value) Value {
	switch raw.Kind() {
	case 'n':
		return Value{}
	case 't':
		return Value{kind: kindTrue}
	case 'f':
		return Value{kind: kindFalse}
	case '"':
		return Value{kind: kindString, text: unquote(raw)}
	case '0':
		return numberOf(raw)
	}
	c := raw.Clone() // Compact works in place; raw is the answer's body
	_ = c.Compact()
	return Value{kind: kindJSON, text: string(c)}
}

// numberOf reads a JSON number: exactly when it is an integer int64 holds
// (9007199254740993 stays itself), as a float64 otherwise.
func numberOf(raw []byte) Value {
	if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		return Value{kind: kindInt, int: n, num: float64(n)}
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil { // only out of range: the syntax is JSON's
		return Value{kind: kindHuge, text: string(raw)}
	}
	return Value{kind: kindFloat, num: f}
}

// unquote returns a JSON string's contents, invalid UTF-8 replaced with
// U+FFFD (as encoding/json did); the usual short values of an inventory
// row (type, status) are not allocated again.
func unquote(raw []byte) string {
	in := raw[1 : len(raw)-1]
	plain := true
	for _, c := range in {
		if c == '\\' || c >= utf8.RuneSelf {
			plain = false
			break
		}
	}
	if !plain {
		b, _ := jsontext.AppendUnquote(nil, raw) // the only possible error: invalid UTF-8, replaced
		return string(b)
	}
	switch string(in) {
	case "":
		return ""
	case "qemu":
		return "qemu"
	case "lxc":
		return "lxc"
	case "running":
		return "running"
	case "stopped":
		return "stopped"
	case "unknown":
		return "unknown"
	}
	return string(in)
}

// IsNull reports an absent or null member.
func (v Value) IsNull() bool { return v.kind == kindNull }

// Text returns the value as Proxmox stores it in a config file: a string
// verbatim, a number canonical (an integral one as an integer, 2.048e+03
// as 2048), a boolean as 1 or 0, an object or array as compact JSON, and
// "" for null.
func (v Value) Text() string {
	switch v.kind {
	case kindString, kindHuge, kindJSON:
		return v.text
	case kindInt:
		return strconv.FormatInt(v.int, 10)
	case kindFloat:
		if v.num == math.Trunc(v.num) && math.Abs(v.num) < 1<<53 {
			return strconv.FormatInt(int64(v.num), 10)
		}
		return strconv.FormatFloat(v.num, 'f', -1, 64)
	case kindTrue:
		return "1"
	case kindFalse:
		return "0"
	}
	return ""
}

// String is Text, quoted when the value was a JSON string, for messages.
func (v Value) String() string {
	switch v.kind {
	case kindNull:
		return "null"
	case kindString:
		return strconv.Quote(v.text)
	}
	return v.Text()
}

// Float reads a number, given as a JSON number or a numeric string
// (ParseFloat).
func (v Value) Float() (float64, error) {
	switch v.kind {
	case kindInt, kindFloat:
		return v.num, nil
	case kindString:
		return ParseFloat(v.text)
	case kindNull:
		return 0, fmt.Errorf("no value")
	}
	return 0, fmt.Errorf("%s is not a number", v)
}

// Int reads an integer, given as a JSON number (in scientific notation
// too, 1e+10) or a numeric string (ParseInt); a fraction is an error.
func (v Value) Int() (int64, error) {
	switch v.kind {
	case kindInt:
		return v.int, nil
	case kindFloat:
		return floatInt(v.num, v)
	case kindString:
		return ParseInt(v.text)
	}
	_, err := v.Float()
	return 0, err
}

// Bool reads a Proxmox boolean: 0/1, "0"/"1", true/false, and the
// spellings ParseBool takes. Null (absent) is false.
func (v Value) Bool() (bool, error) {
	switch v.kind {
	case kindNull, kindFalse:
		return false, nil
	case kindTrue:
		return true, nil
	case kindString:
		return ParseBool(v.text)
	}
	n, err := v.Int()
	if err != nil || (n != 0 && n != 1) {
		return false, fmt.Errorf("%s is not a boolean", v)
	}
	return n == 1, nil
}

// floatInt is f as an integer, if it is one int64 holds; what names the
// value in the error.
func floatInt(f float64, what any) (int64, error) {
	// 2^63 is the first float64 beyond int64; -2^63 is in range.
	if f != math.Trunc(f) || f >= 1<<63 || f < -(1<<63) {
		return 0, fmt.Errorf("%v is not an integer", what)
	}
	return int64(f), nil
}
