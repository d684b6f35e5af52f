package pve

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// TaskTypes returns the PVE task types Proxmox may start for op on a guest
// of kind: qm* for QEMU, vz* for LXC, plus hastart/hastop where Proxmox only
// hands a start, stop or shutdown of an HA-managed guest to the HA manager.
// It is nil when op starts no task for kind: reads, unknown kinds, and LXC
// config updates (synchronous on PVE).
func TaskTypes(kind Kind, op Op) []string {
	var p string
	switch kind {
	case KindQEMU:
		p = "qm"
	case KindLXC:
		p = "vz"
	default:
		return nil
	}
	switch op {
	case OpStart:
		return []string{p + "start", "hastart"}
	case OpStop:
		return []string{p + "stop", "hastop"}
	case OpShutdown:
		return []string{p + "shutdown", "hastop"}
	case OpReboot:
		return []string{p + "reboot"}
	case OpUpdateConfig:
		if kind == KindQEMU {
			return []string{"qmconfig"}
		}
	case OpClone:
		return []string{p + "clone"}
	case OpDelete:
		return []string{p + "destroy"}
	case OpResize:
		return []string{"resize"}
	case OpMigrate:
		return []string{p + "migrate", "hamigrate"}
	case OpSnapshot:
		return []string{p + "snapshot"}
	case OpDeleteSnapshot:
		return []string{p + "delsnapshot"}
	}
	return nil
}

// findTaskLimit bounds each task list read by FindTask. The list is already
// narrowed to one type, one guest and the time since the action: far fewer
// tasks than this.
const findTaskLimit = 50

// FindTask returns the newest task that op started on ref since the given
// time, running or finished: the task of one of [TaskTypes](ref.Kind, op)
// whose id is ref.VMID, on ref.Node, whose start second is at or after
// since's (PVE records start times in whole seconds). A zero since means
// any time. found is false when there is none, and also when op starts no
// task for the kind (an LXC config update); an op that is no mutation at
// all is a ClassTerminal error.
//
// It reads GET /nodes/{node}/tasks?vmid=&typefilter=&source=all&since=&limit=
// once per task type, and re-checks every entry itself. A clone's task
// carries the source vmid: pass the source guest as ref (clones of one
// source to different targets cannot be told apart here). Tasks are not
// attributed to a user: a task someone else started counts.
//
// It implements executor.TaskFinder: an executor adopts the task a
// predecessor started but died before journalling, instead of issuing the
// mutation again.
func (c *Client) FindTask(ctx context.Context, ref GuestRef, op Op, since time.Time) (t TaskRef, found bool, err error) {
	if err := ref.Validate(); err != nil {
		return TaskRef{}, false, &Error{Class: ClassTerminal, Op: OpTaskList, Ref: ref, Message: err.Error(), Err: err}
	}
	types := TaskTypes(ref.Kind, op)
	if len(types) == 0 {
		if len(TaskTypes(KindQEMU, op)) > 0 {
			return TaskRef{}, false, nil // a mutation without a task for this kind
		}
		err := fmt.Errorf("operation %q starts no Proxmox task", op)
		return TaskRef{}, false, &Error{Class: ClassTerminal, Op: OpTaskList, Ref: ref, Message: err.Error(), Err: err}
	}
	minStart := sinceSecond(since)
	var best UPID
	for _, typ := range types {
		tasks, err := c.guestTasks(ctx, ref, typ, minStart)
		if err != nil {
			return TaskRef{}, false, err
		}
		for _, ft := range tasks {
			if !found || newerTask(ft.u, best) {
				t, best, found = TaskRef{UPID: ft.upid, Node: ft.u.Node}, ft.u, true
			}
		}
	}
	if found {
		c.log.Debug().Str("op", string(op)).Stringer("guest", ref).Str("upid", t.UPID).Msg("pve task found")
	}
	return t, found, nil
}

// sinceSecond is the start second a task must have reached to count as
// started at or after since (0: any).
func sinceSecond(since time.Time) int64 {
	if !since.IsZero() && since.Unix() > 0 {
		return since.Unix()
	}
	return 0
}

// foundTask is a task list entry: its UPID as listed and parsed.
type foundTask struct {
	upid string
	u    UPID
}

// guestTasks reads the tasks of type typ on ref (id ref.VMID, on ref.Node)
// that started at or after the second minStart (0: any), running or
// finished: GET /nodes/{node}/tasks?vmid=&typefilter=&source=all&since=&limit=.
// Every entry is checked again here, so that a server which ignores a
// filter cannot hand over another guest's or type's task.
func (c *Client) guestTasks(ctx context.Context, ref GuestRef, typ string, minStart int64) ([]foundTask, error) {
	vmid := strconv.Itoa(ref.VMID)
	q := url.Values{}
	q.Set("vmid", vmid)
	q.Set("typefilter", typ)
	q.Set("source", "all") // running tasks too: a killed executor's task may still run
	if minStart > 0 {
		q.Set("since", strconv.FormatInt(minStart, 10))
	}
	q.Set("limit", strconv.Itoa(findTaskLimit))
	// The other fields of an entry are its UPID's own, decoded from it.
	items, err := call[[]struct {
		UPID string `json:"upid"`
	}](ctx, c, OpTaskList, ref, http.MethodGet, "/nodes/"+ref.Node+"/tasks?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	var out []foundTask
	for _, it := range items {
		s := it.UPID
		u, err := ParseUPID(s)
		if err != nil {
			c.log.Debug().Str("upid", s).Err(err).Msg("pve task list entry skipped")
			continue
		}
		if u.Node != ref.Node || u.Type != typ || u.ID != vmid || u.StartTime.Unix() < minStart {
			continue
		}
		out = append(out, foundTask{upid: s, u: u})
	}
	return out, nil
}

// newerTask orders tasks of one node by start second, then by the worker's
// process start (clock ticks since boot) within a second.
func newerTask(a, b UPID) bool {
	if !a.StartTime.Equal(b.StartTime) {
		return a.StartTime.After(b.StartTime)
	}
	if a.PStart != b.PStart {
		return a.PStart > b.PStart
	}
	return a.PID > b.PID
}
