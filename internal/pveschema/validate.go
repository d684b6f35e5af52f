package pveschema

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Proxmox's messages (pve-common PVE::JSONSchema), kept verbatim because
// clients match on them.
const (
	msgUndeclared = "property is not defined in schema and the schema does not allow additional properties"
	msgMissing    = "property is missing and it is not optional"
)

// Validate checks a request's parameters (query and body merged, values as
// strings) and its path's values against the operation's schema; the
// result maps each offending parameter to Proxmox's message, empty when
// the request is valid.
func Validate(method, path string, params map[string]string) map[string]string {
	problems := map[string]string{}
	op, pathVals, ok := Lookup(method, path)
	if !ok {
		problems[""] = "Method '" + method + " " + path + "' not implemented"
		return problems
	}
	all := make(map[string]string, len(params)+len(pathVals))
	for k, v := range params {
		all[k] = v
	}
	for k, v := range pathVals { // the path's value is the one Proxmox uses
		all[k] = v
	}
	checkObject("", op.Params, op.AdditionalProperties, all, problems)
	return problems
}

// checkObject is pve-common's check_object: every declared key present is
// checked, a missing mandatory one and (unless allowed) an undeclared one
// reported. path prefixes the keys in messages ("net0.model").
func checkObject(path string, decl []Param, additional bool, vals map[string]string, problems map[string]string) {
	for name, v := range vals {
		key := join(path, name)
		p := find(decl, name)
		if p == nil {
			if !additional {
				problems[key] = msgUndeclared
			}
			continue
		}
		if p.Requires != "" {
			if _, ok := vals[p.Requires]; !ok {
				problems[join(path, p.Requires)] = "missing property - '" + key + "' requires this property"
			}
		}
		if msg := checkValue(key, p, v); msg != "" {
			problems[key] = msg
		}
	}
	for i := range decl {
		p := &decl[i]
		if p.Optional || p.Alias != "" || strings.HasSuffix(p.Name, "[n]") {
			continue
		}
		if _, ok := vals[p.Name]; !ok {
			problems[join(path, p.Name)] = msgMissing
		}
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// checkValue is check_prop for a present value, in pve-common's order:
// type, pattern, lengths, bounds, enum, format. It returns "" when valid.
func checkValue(key string, p *Param, v string) string {
	if p.Type == "array" && p.Items != nil {
		// A form body repeats an array's key; one value here is one element.
		return checkValue(key, p.Items, v)
	}
	switch p.Type {
	case "integer":
		if !isInteger(v) {
			return "type check ('integer') failed - got '" + v + "'"
		}
	case "number":
		if !isNumber(v) {
			return "type check ('number') failed - got '" + v + "'"
		}
	case "boolean":
		if v != "0" && v != "1" { // JSONSchema.pm's check_type: "true" is refused
			return "type check ('boolean') failed - got '" + v + "'"
		}
	}
	if p.Pattern != "" {
		if re := compiled(p.Pattern); re != nil && !re.MatchString(v) {
			return "value does not match the regex pattern"
		}
	}
	if p.MaxLength > 0 && len(v) > p.MaxLength {
		return "value may only be " + strconv.Itoa(p.MaxLength) + " characters long"
	}
	if p.MinLength > 0 && len(v) < p.MinLength {
		return "value must be at least " + strconv.Itoa(p.MinLength) + " characters long"
	}
	if isNumber(v) { // Perl compares any numeric-looking value, strings too
		n, _ := strconv.ParseFloat(v, 64)
		if p.HasMin && n < p.Min {
			return "value must have a minimum value of " + num(p.Min)
		}
		if p.HasMax && n > p.Max {
			return "value must have a maximum value of " + num(p.Max)
		}
	}
	if len(p.Enum) > 0 && !slices.Contains(p.Enum, v) {
		return "value '" + v + "' does not have a value in the enumeration '" + strings.Join(p.Enum, ", ") + "'"
	}
	if p.Props != nil {
		if err := checkPropString(key, p.Props, v); err != "" {
			return "invalid format - " + err
		}
	} else if p.Format != "" {
		if err := checkFormat(key, p.Format, v); err != "" {
			return "invalid format - " + err
		}
	}
	return ""
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

var (
	integerRE = regexp.MustCompile(`^[+-]?\d+$`)
	numberRE  = regexp.MustCompile(`^[+-]?(\d+\.\d+|\d+\.?|\.\d+)([eE][+-]?\d+)?$`)
)

func isInteger(v string) bool { return integerRE.MatchString(v) }
func isNumber(v string) bool  { return numberRE.MatchString(v) }

// patterns caches the schema's patterns, anchored as Perl's m/^$pattern$/;
// a nil entry is a pattern RE2 cannot compile (then unchecked).
var patterns sync.Map

// perlSpellings turn what Perl prints of a qr// into RE2: (?^:…) and
// (?^i:…) reset flags, \0 is NUL.
var perlSpellings = strings.NewReplacer(`(?^:`, `(?:`, `(?^i:`, `(?i:`, `\0`, `\x00`)

func compiled(p string) *regexp.Regexp {
	if re, ok := patterns.Load(p); ok {
		return re.(*regexp.Regexp)
	}
	re, err := regexp.Compile(`^(?:` + perlSpellings.Replace(p) + `)$`)
	if err != nil {
		re = nil
	}
	patterns.Store(p, re)
	return re
}

// checkPropString is pve-common's parse_property_string followed by
// check_object on its keys (additional keys never allowed); it returns the
// error text without the "invalid format - " prefix.
func checkPropString(key string, ps *PropString, v string) string {
	vals := map[string]string{}
	defaultKey := ""
	for part := range strings.SplitSeq(v, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		k, val, hasEq := strings.Cut(part, "=")
		switch {
		case hasEq && k != "" && val != "":
			if _, dup := vals[k]; dup {
				return "duplicate key in comma-separated list property: " + k
			}
			p := find(ps.Keys, k)
			if p != nil && p.Alias != "" {
				if p.KeyAlias != "" { // virtio=MAC: model=virtio, macaddr=MAC
					if _, dup := vals[p.KeyAlias]; dup {
						return "duplicate key in comma-separated list property: " + p.KeyAlias
					}
					vals[p.KeyAlias] = k
				}
				k = p.Alias
				p = find(ps.Keys, k)
			}
			if p == nil {
				return "invalid key in comma-separated list property: " + k
			}
			if p.Type == "boolean" {
				val = parseBoolean(val)
			}
			vals[k] = val
		case !hasEq:
			if defaultKey != "" {
				return "duplicate key in comma-separated list property: " + defaultKey
			}
			for _, p := range ps.Keys {
				if p.DefaultKey {
					defaultKey = p.Name
					break
				}
			}
			if defaultKey == "" {
				return "value without key, but schema does not define a default key"
			}
			if _, dup := vals[defaultKey]; dup {
				return "duplicate key in comma-separated list property: " + defaultKey
			}
			vals[defaultKey] = part
		default:
			return "missing key in comma-separated list property"
		}
	}
	problems := map[string]string{}
	checkObject(key, ps.Keys, false, vals, problems)
	if len(problems) == 0 {
		return ""
	}
	// PVE::Exception's text: the message, then one "key: error" per line.
	lines := make([]string, 0, len(problems))
	for k, m := range problems {
		lines = append(lines, k+": "+m)
	}
	slices.Sort(lines)
	return "format error\n" + strings.Join(lines, "\n")
}

// parseBoolean is pve-common's parse_boolean, used inside property strings
// only; an unknown spelling is left for the type check to refuse.
func parseBoolean(v string) string {
	switch strings.ToLower(v) {
	case "1", "on", "yes", "true":
		return "1"
	case "0", "off", "no", "false":
		return "0"
	}
	return v
}
