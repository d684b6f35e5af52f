package planner

import (
	"strconv"

	"github.com/converge-pve/converge/events"
)

// field is one managed config field: its PVE key and desired, applied and
// pending values in normalised string form.
type field struct {
	key, label         string
	want, have, queued string
	hasQueued          bool
}

// managedFields appends d's managed fields to fs (a caller's buffer: a
// plan, the full pass's above all, allocates nothing for them).
func managedFields(fs []field, d *events.Desired, o *events.Observed) []field {
	add := func(key, label, want, have string) {
		q, ok := o.Pending[key]
		fs = append(fs, field{key: key, label: label, want: want, have: have, queued: q, hasQueued: ok})
	}
	if d.Name != nil {
		add("name", "name", *d.Name, o.Config.Name)
	}
	if d.Description != nil {
		add("description", "description", events.NormaliseDescription(*d.Description), events.NormaliseDescription(o.Config.Description))
	}
	if want, ok := wantTags(d, o); ok {
		add("tags", "tags", events.FormatTags(want), events.FormatTags(o.Config.Tags))
	}
	if d.Cores != nil {
		add("cores", "cores", strconv.Itoa(*d.Cores), strconv.Itoa(o.Config.Cores))
	}
	if d.MemoryMiB != nil {
		add("memory", "memory_mib", strconv.Itoa(*d.MemoryMiB), strconv.Itoa(o.Config.MemoryMiB))
	}
	if d.OnBoot != nil {
		add("onboot", "onboot", events.FormatBool(*d.OnBoot), events.FormatBool(o.Config.OnBoot))
	}
	wholeFields(d, o, add)
	return fs
}

func show(s string) string {
	if len(s) > 40 {
		s = s[:37] + "..."
	}
	return strconv.Quote(s)
}
