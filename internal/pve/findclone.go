package pve

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"time"
)

// cloneLogHead is how many of a clone task's first log lines FindClone
// reads: Proxmox prints "creating a clone of … with ID …" first, after at
// most a few lines of lock waiting.
const cloneLogHead = 20

// cloneLineRE is the line clone_vm prints as its worker starts:
// qemu-server "creating a clone of VM <src> with ID <newid>",
// pve-container "creating a clone of container <src> with ID <newid>".
var cloneLineRE = regexp.MustCompile(`^creating a clone of (VM|container) (\d+) with ID (\d+)$`)

// FindClone returns the newest clone task of src into newid that started
// at or after since's second (zero since: any time), running or finished:
// a qmclone/vzclone task with id src.VMID on src.Node whose log's first
// lines say "creating a clone of … <src> with ID <newid>". found is false
// when there is none. A clone task's UPID names only its source, so the
// log tells clones of one template into different vmids apart.
//
// It is how a restarted executor recognises a clone it issued but did not
// journal, instead of cloning again. A clone that failed before its worker
// printed that line (a lock timeout on the source) is not found, and left
// nothing behind.
func (c *Client) FindClone(ctx context.Context, src GuestRef, newid int, since time.Time) (t TaskRef, found bool, err error) {
	if err := src.Validate(); err != nil {
		return TaskRef{}, false, &Error{Class: ClassTerminal, Op: OpTaskList, Ref: src, Message: err.Error(), Err: err}
	}
	if newid < MinVMID || newid > MaxVMID {
		err := fmt.Errorf("clone target vmid %d out of range %d..%d", newid, MinVMID, MaxVMID)
		return TaskRef{}, false, &Error{Class: ClassTerminal, Op: OpTaskList, Ref: src, Message: err.Error(), Err: err}
	}
	word := map[Kind]string{KindQEMU: "VM", KindLXC: "container"}[src.Kind]
	tasks, err := c.guestTasks(ctx, src, TaskTypes(src.Kind, OpClone)[0], sinceSecond(since))
	if err != nil {
		return TaskRef{}, false, err
	}
	sort.Slice(tasks, func(i, j int) bool { return newerTask(tasks[i].u, tasks[j].u) })
	for _, ft := range tasks {
		lines, err := c.taskLogHead(ctx, ft, cloneLogHead)
		if Classify(err) == ClassGone {
			continue // dropped from the task log meanwhile
		}
		if err != nil {
			return TaskRef{}, false, err
		}
		for _, l := range lines {
			m := cloneLineRE.FindStringSubmatch(l)
			if m != nil && m[1] == word && m[2] == strconv.Itoa(src.VMID) && m[3] == strconv.Itoa(newid) {
				t = TaskRef{UPID: ft.upid, Node: ft.u.Node}
				c.log.Debug().Stringer("guest", src).Int("newid", newid).Str("upid", t.UPID).Msg("pve clone task found")
				return t, true, nil
			}
		}
	}
	return TaskRef{}, false, nil
}

// taskLogHead reads the first n lines of a task's log.
func (c *Client) taskLogHead(ctx context.Context, ft foundTask, n int) ([]string, error) {
	path := fmt.Sprintf("/nodes/%s/tasks/%s/log?start=0&limit=%d", ft.u.Node, ft.upid, n)
	lines, err := call[[]logLine](ctx, c, OpTaskLog, ft.u.Ref(), http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].N < lines[j].N })
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = l.T
	}
	return out, nil
}
