package events

import (
	"sort"
	"strings"
)

// Normalisers turn the many spellings Proxmox accepts for one managed value
// into one, so that a round trip through Proxmox never reads as drift: the
// observer and executors report values through them, and Plan compares
// desired values through them. They are pure.

// NormaliseDescription trims trailing whitespace: QEMU trims it on read, LXC
// keeps a trailing "\n". An empty result means "no description" (Proxmox
// drops the key for "").
func NormaliseDescription(s string) string {
	return strings.TrimRight(s, " \t\r\n")
}

// isTagSeparator: hand-written configs may separate tags with ',' as well
// as ';' or whitespace.
func isTagSeparator(r rune) bool {
	return r == ',' || r == ';' || r == ' ' || r == '\t' || r == '\n' || r == '\r'
}

// ParseTags reads a Proxmox tags value. The result is sorted, lower-cased,
// duplicate-free and never nil, as Proxmox's default tag style stores it.
func ParseTags(s string) []string {
	return NormaliseTags(strings.FieldsFunc(s, isTagSeparator))
}

// NormaliseTags lower-cases, dedups and sorts tags, splitting any element
// that holds separators; empty elements are dropped. Never nil. Tags are a
// case-insensitive set.
func NormaliseTags(tags []string) []string {
	set := make(map[string]struct{}, len(tags))
	for _, t := range tags {
		for _, f := range strings.FieldsFunc(t, isTagSeparator) {
			set[strings.ToLower(f)] = struct{}{}
		}
	}
	out := make([]string, 0, len(set))
	for t := range set {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// FormatTags renders tags the way Proxmox stores them: normalised,
// ';'-joined. "" means "no tags" (cleared with delete=tags, never tags="").
// Two tag lists are the same set exactly when their FormatTags agree.
func FormatTags(tags []string) string {
	if normalisedTags(tags) {
		return strings.Join(tags, ";") // the common case: nothing to normalise
	}
	return strings.Join(NormaliseTags(tags), ";")
}

// normalisedTags reports whether NormaliseTags would return tags as they
// are: each non-empty, lower-case, without separators, and in strictly
// increasing order (sorted, no duplicates). Allocates nothing.
func normalisedTags(tags []string) bool {
	for i, t := range tags {
		if t == "" || strings.ToLower(t) != t || strings.ContainsFunc(t, isTagSeparator) || i > 0 && tags[i-1] >= t {
			return false
		}
	}
	return true
}

// FormatBool renders a boolean as Proxmox stores it: "1" or "0".
func FormatBool(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
