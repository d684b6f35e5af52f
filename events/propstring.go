package events

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Proxmox's property strings ("key=value,key=value", one key possibly
// written bare) as pve-common's PVE::JSONSchema parse_property_string and
// print_property_string handle them. Printing writes the default key's
// value bare first, then the schema's required keys, then every other key
// in sorted order; booleans are stored as parse_boolean leaves them (1/0);
// sizes (format disk-size) go through format_size.

// propKeyRE is the shape of every key in Proxmox's property-string schemas.
var propKeyRE = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)

// PropString is a parsed property string: the default key's value (bare
// part) and every keyed part. Aliases are already resolved.
type PropString struct {
	Bare    string
	HasBare bool
	KV      map[string]string
}

// ParsePropString splits s like parse_property_string. Unlike Proxmox it
// trims the blanks around parts, keys and values (Proxmox rejects " key=",
// so no stored value has them) and checks only a key's shape: a key this
// package does not know is kept, so newer Proxmox versions parse. alias
// maps alias keys (volume) to their canonical key (file).
func ParsePropString(what, s string, alias map[string]string) (PropString, error) {
	p := PropString{KV: map[string]string{}}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, keyed := strings.Cut(part, "=")
		if !keyed {
			if p.HasBare {
				return p, fmt.Errorf("%s %q: two values without a key (%q and %q)", what, s, p.Bare, part)
			}
			p.Bare, p.HasBare = part, true
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch {
		case k == "":
			return p, fmt.Errorf("%s %q: %q has no key", what, s, part)
		case !propKeyRE.MatchString(k):
			return p, fmt.Errorf("%s %q: invalid key %q", what, s, k)
		case v == "":
			return p, fmt.Errorf("%s %q: key %q has no value", what, s, k)
		}
		if canon, ok := alias[k]; ok {
			k = canon
		}
		if _, dup := p.KV[k]; dup {
			return p, fmt.Errorf("%s %q: duplicate key %q", what, s, k)
		}
		p.KV[k] = v
	}
	return p, nil
}

// TakeDefault moves the default key's value out of kv (written either bare
// or as key=value) into bare.
func (p *PropString) TakeDefault(what, s, key string) error {
	v, ok := p.KV[key]
	if !ok {
		return nil
	}
	if p.HasBare {
		return fmt.Errorf("%s %q: %s given twice (%q and %s=%s)", what, s, key, p.Bare, key, v)
	}
	delete(p.KV, key)
	p.Bare, p.HasBare = v, true
	return nil
}

// ParseBoolean is pve-common's parse_boolean: 1/on/yes/true and
// 0/off/no/false, any case, stored as "1" and "0".
func ParseBoolean(v string) (string, bool) {
	switch strings.ToLower(v) {
	case "1", "on", "yes", "true":
		return "1", true
	case "0", "off", "no", "false":
		return "0", true
	}
	return v, false
}

// NormaliseBooleans rewrites the boolean keys of kv to 1/0.
func NormaliseBooleans(what, s string, kv map[string]string, boolKeys map[string]bool) error {
	for k, v := range kv {
		if !boolKeys[k] {
			continue
		}
		b, ok := ParseBoolean(v)
		if !ok {
			return fmt.Errorf("%s %q: %s=%q is not a boolean (1/0, on/off, yes/no, true/false)", what, s, k, v)
		}
		kv[k] = b
	}
	return nil
}

// PrintPropString writes first (already formatted parts, in order), then
// the required keys, then the remaining keys of kv sorted, as
// print_property_string does.
func PrintPropString(first []string, kv map[string]string, required ...string) string {
	parts := append([]string(nil), first...)
	done := map[string]bool{}
	for _, k := range required {
		if v, ok := kv[k]; ok {
			parts = append(parts, k+"="+v)
			done[k] = true
		}
	}
	keys := make([]string, 0, len(kv))
	for k := range kv {
		if !done[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		parts = append(parts, k+"="+kv[k])
	}
	return strings.Join(parts, ",")
}
