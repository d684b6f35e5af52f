package pve

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Parsers of Proxmox's values written as text (a config's strings, a
// [Value] that came as a JSON string): numbers in any notation, booleans
// in every spelling PVE accepts, memory as a property string. The
// normalisers of managed values (tags, description) are package events':
// observer, executor and planner share them.

// ParseFloat reads a numeric string, including scientific notation
// ("2.048e+03") and surrounding blanks.
func ParseFloat(s string) (float64, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	return f, nil
}

// ParseInt reads an integer written as a numeric string, in scientific
// notation too ("1e+10"); a fraction is an error.
func ParseInt(s string) (int64, error) {
	if n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64); err == nil {
		return n, nil // full int64 precision, which a float64 lacks
	}
	f, err := ParseFloat(s)
	if err != nil {
		return 0, err
	}
	return floatInt(f, s)
}

// ParseBool reads PVE's boolean spellings: "1"/"0", and those PVE accepts
// on input (true/false, yes/no, on/off); "" is false.
func ParseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1", "true", "yes", "on":
		return true, nil
	case "0", "false", "no", "off", "":
		return false, nil
	}
	return false, fmt.Errorf("%q is not a boolean", s)
}

// ParseMemoryMiB reads a QEMU/LXC memory value in MiB as a config holds
// it: "2048", the property string "current=2048[,…]" or "2048,…", or
// scientific notation.
func ParseMemoryMiB(s string) (int, error) {
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
	n, err := ParseInt(val)
	if err != nil {
		return 0, fmt.Errorf("memory: %w", err)
	}
	return memoryRange(n)
}

// memoryMiB reads a memory member: a number (PVE 7) or a string (PVE 8+,
// ParseMemoryMiB).
func memoryMiB(v Value) (int, error) {
	switch v.kind {
	case kindString:
		return ParseMemoryMiB(v.text)
	case kindInt, kindFloat:
		n, err := v.Int()
		if err != nil {
			return 0, fmt.Errorf("memory: %w", err)
		}
		return memoryRange(n)
	}
	return 0, fmt.Errorf("memory %s is not a size", v)
}

func memoryRange(n int64) (int, error) {
	if n < 0 || n > math.MaxInt32 {
		return 0, fmt.Errorf("memory %d MiB out of range", n)
	}
	return int(n), nil
}
