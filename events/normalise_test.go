package events_test

import (
	"reflect"
	"testing"

	"github.com/converge-pve/converge/events"
)

func TestNormaliseDescription(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"web server", "web server"},
		{"db container\n", "db container"},        // LXC keeps the trailing newline
		{"line1\nline2\r\n \t\n", "line1\nline2"}, // trailing whitespace of any kind
		{"  leading kept", "  leading kept"},      // QEMU keeps leading whitespace
		{"\n\n", ""},                              // blank ≡ absent
		{"a<br>b\n", "a<br>b"},                    // UI HTML is left alone
		{"unicode ✓ ", "unicode ✓"},
	} {
		if got := events.NormaliseDescription(tc.in); got != tc.want {
			t.Errorf("NormaliseDescription(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestParseTags(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", []string{}},
		{"prod;web", []string{"prod", "web"}},
		{"web;prod", []string{"prod", "web"}},
		{"DB,Prod", []string{"db", "prod"}},         // hand-written, comma-separated
		{"a, b;c  d", []string{"a", "b", "c", "d"}}, // mixed separators
		{"x;X;x", []string{"x"}},                    // dedup, case-insensitive
		{";;", []string{}},                          // only separators
		{"go-proxmox+cloud-init", []string{"go-proxmox+cloud-init"}},
	} {
		got := events.ParseTags(tc.in)
		if got == nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseTags(%q) = %#v, want %#v", tc.in, got, tc.want)
		}
	}
}

func TestTagSetsAndFormat(t *testing.T) {
	for _, tc := range []struct {
		a, b []string
		want bool
	}{
		{nil, []string{}, true},
		{[]string{"Prod", "web"}, []string{"web", "prod"}, true},
		{[]string{"prod;web"}, []string{"web", "prod"}, true},
		{[]string{"prod"}, []string{"prod", "web"}, false},
		{[]string{"a", "a"}, []string{"a"}, true},
		{[]string{"a"}, []string{"b"}, false},
	} {
		if got := events.FormatTags(tc.a) == events.FormatTags(tc.b); got != tc.want {
			t.Errorf("same set %q, %q = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
	if got := events.FormatTags([]string{"Web", "prod", "web"}); got != "prod;web" {
		t.Errorf("FormatTags = %q, want %q", got, "prod;web")
	}
	if got := events.FormatTags(nil); got != "" {
		t.Errorf("FormatTags(nil) = %q, want empty", got)
	}
}
