package pvesim

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// taskTypes are the Proxmox task types the simulator runs (the type field
// of their UPIDs): what Faults.TaskLatencyByType may name. A name outside
// it is refused, so that a typo ("start" for "qmstart") does not silently
// leave a task at the default latency.
var taskTypes = map[string]bool{
	"qmstart": true, "qmstop": true, "qmshutdown": true, "qmreboot": true, "qmreset": true,
	"qmsuspend": true, "qmresume": true, "qmconfig": true, "qmclone": true, "qmcreate": true,
	"qmtemplate": true, "qmdestroy": true, "qmigrate": true, "qmsnapshot": true,
	"qmdelsnapshot": true, "qmrollback": true,
	"vzstart": true, "vzstop": true, "vzshutdown": true, "vzreboot": true, "vzsuspend": true,
	"vzresume": true, "vzclone": true, "vzcreate": true, "vztemplate": true, "vzdestroy": true,
	"vzmigrate": true, "vzsnapshot": true, "vzdelsnapshot": true, "vzrollback": true,
	"hamigrate": true, "resize": true, "download": true,
}

// TaskTypes lists the task types Faults.TaskLatencyByType accepts, sorted.
func TaskTypes() []string { return slices.Sorted(maps.Keys(taskTypes)) }

// TaskLatencyFor is how long a task of type typ (qmstart, qmconfig, …)
// runs: its entry in TaskLatencyByType when it has one (zero included),
// else TaskLatency.
func (f Faults) TaskLatencyFor(typ string) time.Duration {
	if d, ok := f.TaskLatencyByType[typ]; ok {
		return time.Duration(d)
	}
	return time.Duration(f.TaskLatency)
}

func (f Faults) validateByType() error {
	for typ, d := range f.TaskLatencyByType {
		if !taskTypes[typ] {
			return fmt.Errorf("pvesim: Faults.TaskLatencyByType: %q is not a task type the simulator runs (%s)", typ, strings.Join(TaskTypes(), ", "))
		}
		if d < 0 {
			return fmt.Errorf("pvesim: Faults.TaskLatencyByType[%s] must be >= 0, got %s", typ, time.Duration(d))
		}
	}
	return nil
}

// clone gives f a map of its own: the faults in force are shared by every
// reader, so a change is made to a copy (copy on write).
func (f Faults) clone() Faults {
	if f.TaskLatencyByType != nil {
		f.TaskLatencyByType = maps.Clone(f.TaskLatencyByType)
	}
	return f
}

// ParseTaskLatencies reads "TYPE=DURATION" items (qmstart=1s), as the
// --task-latency-type flag of `converge sim` takes them.
func ParseTaskLatencies(items []string) (map[string]Duration, error) {
	if len(items) == 0 {
		return nil, nil
	}
	out := make(map[string]Duration, len(items))
	for _, it := range items {
		typ, v, ok := strings.Cut(it, "=")
		if !ok || typ == "" {
			return nil, fmt.Errorf("%q: want TYPE=DURATION, e.g. qmstart=1s", it)
		}
		if !taskTypes[typ] {
			return nil, fmt.Errorf("%q: %s is not a task type the simulator runs (%s)", it, typ, strings.Join(TaskTypes(), ", "))
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("%q: want a duration >= 0, such as 200ms or 1s", it)
		}
		out[typ] = Duration(d)
	}
	return out, nil
}
