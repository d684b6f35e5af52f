package pve

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fastWait keeps tests quick; intervals only pace polling, nothing asserts
// on elapsed time.
var fastWait = WaitOptions{Interval: time.Millisecond, MaxInterval: 2 * time.Millisecond}

func TestParseUPID(t *testing.T) {
	u, err := ParseUPID("UPID:optiplex2:000137B5:00112EB4:6991F9E1:vzcreate:300:root@pam!opentofu:")
	if err != nil {
		t.Fatal(err)
	}
	want := UPID{Node: "optiplex2", PID: 0x137B5, PStart: 0x112EB4, StartTime: time.Unix(0x6991F9E1, 0).UTC(),
		Type: "vzcreate", ID: "300", User: "root@pam!opentofu"}
	if u != want {
		t.Errorf("ParseUPID = %+v, want %+v", u, want)
	}
	// pstart may have 9 hex digits; the trailing colon is tolerated missing.
	if _, err := ParseUPID("UPID:pve:0001A2B3:1C0FFEE00:6791F9E1:qmstart:100:root@pam"); err != nil {
		t.Errorf("9-digit pstart, no trailing colon: %v", err)
	}
	for _, bad := range []string{
		"", "x", "UPID:pve:1:2:3:qmstart:100", "UPID::1:2:3:qmstart:100:root@pam:",
		"UPID:pve:zz:2:3:qmstart:100:root@pam:", "UPID:pve:1:2:3:qmstart:100:root@pam:extra",
		"UPID:../x:1:2:3:qmstart:100:root@pam:",
	} {
		if _, err := ParseUPID(bad); err == nil {
			t.Errorf("ParseUPID(%q): want error", bad)
		}
	}
	for typ, op := range map[string]Op{
		"qmstart": OpStart, "vzstart": OpStart, "hastart": OpStart, "qmstop": OpStop, "hastop": OpStop,
		"qmshutdown": OpShutdown, "vzshutdown": OpShutdown, "qmreboot": OpReboot, "qmconfig": OpUpdateConfig,
		"qmclone": OpClone, "vzclone": OpClone, "qmdestroy": OpDelete, "vzdestroy": OpDelete, "vzdump": OpUnknown,
	} {
		if got := (UPID{Type: typ}).Op(); got != op {
			t.Errorf("UPID{Type:%q}.Op() = %q, want %q", typ, got, op)
		}
	}
	if got := (UPID{Node: "pve", Type: "vzstop", ID: "200"}).Ref(); got != ct200 {
		t.Errorf("Ref = %v", got)
	}
}

func TestWaitTaskOutcomes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		typ      string
		running  int
		exit     string
		log      []string
		wantRes  TaskResult
		wantErr  Class // -1: no error
		wantPoll int
	}{
		{"ok after polling", "qmstart", 2, "OK", []string{"TASK OK"},
			TaskResult{ExitStatus: "OK", OK: true}, -1, 2},
		{"warnings are success", "qmconfig", 0, "WARNINGS: 2",
			[]string{"cannot delete 'x' - not set in current configuration!", "no efidisk configured", "TASK WARNINGS: 2"},
			TaskResult{ExitStatus: "WARNINGS: 2", OK: true, Warnings: 2,
				Log: []string{"cannot delete 'x' - not set in current configuration!", "no efidisk configured", "TASK WARNINGS: 2"}}, -1, 0},
		{"qemu start of running VM is already done", "qmstart", 1, "VM 100 already running",
			[]string{"TASK ERROR: VM 100 already running"},
			TaskResult{ExitStatus: "VM 100 already running", Log: []string{"TASK ERROR: VM 100 already running"}}, ClassAlreadyDone, 1},
		{"locked at delete", "qmdestroy", 0, "VM is locked (backup)",
			[]string{"trying to acquire lock...", "TASK ERROR: VM is locked (backup)"},
			TaskResult{ExitStatus: "VM is locked (backup)", Log: []string{"trying to acquire lock...", "TASK ERROR: VM is locked (backup)"}}, ClassLocked, 0},
		{"shutdown timeout", "qmshutdown", 3, "VM quit/powerdown failed - got timeout",
			[]string{"TASK ERROR: VM quit/powerdown failed - got timeout"},
			TaskResult{ExitStatus: "VM quit/powerdown failed - got timeout", Log: []string{"TASK ERROR: VM quit/powerdown failed - got timeout"}}, ClassTransient, 3},
		{"unknown failure", "qmclone", 0, "clone failed: storage full", []string{"TASK ERROR: clone failed: storage full"},
			TaskResult{ExitStatus: "clone failed: storage full", Log: []string{"TASK ERROR: clone failed: storage full"}}, ClassUnknown, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			id := upid(tc.typ, "100")
			f.task(id, tc.running, tc.exit, tc.log...)
			c := f.client(t)
			var polls atomic.Int32
			opts := fastWait
			opts.OnPoll = func() { polls.Add(1) }
			res, err := c.WaitTask(bg, TaskRef{UPID: id, Node: "pve"}, opts)
			tc.wantRes.UPID = id
			tc.wantRes.Polls = tc.running + 1 // the polls that found it running, then the one that found it ended
			if !reflect.DeepEqual(res, tc.wantRes) {
				t.Errorf("result\n got  %+v\n want %+v", res, tc.wantRes)
			}
			if tc.wantErr < 0 {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
			} else {
				e := asError(t, err)
				if e.Class != tc.wantErr || e.UPID != id || e.Message != tc.exit || e.Status != 0 {
					t.Errorf("error = %+v, want class %v", e, tc.wantErr)
				}
				if e.Ref.VMID != 100 || e.Ref.Node != "pve" || e.Ref.Kind != KindQEMU {
					t.Errorf("error ref = %v", e.Ref)
				}
			}
			if int(polls.Load()) != tc.wantPoll {
				t.Errorf("OnPoll called %d times, want %d", polls.Load(), tc.wantPoll)
			}
		})
	}
}

func TestWaitTaskRawUPIDInPath(t *testing.T) {
	f := newFake(t)
	id := "UPID:pve:000137B5:00112EB4:6991F9E1:vzcreate:300:root@pam!opentofu:"
	f.task(id, 0, "OK")
	c := f.client(t)
	if _, err := c.WaitTask(bg, TaskRef{UPID: id}, fastWait); err != nil { // Node taken from the UPID
		t.Fatal(err)
	}
	want := "/api2/json/nodes/pve/tasks/" + id + "/status"
	if got := f.last().RequestURI; got != want {
		t.Errorf("RequestURI = %q, want raw %q", got, want)
	}
}

func TestWaitTaskIgnoresEchoedUPID(t *testing.T) {
	// go-proxmox's Task.Ping decodes the answer into the task, so a wrong
	// echoed upid redirects its next poll; ours keeps polling its own task.
	f := newFake(t)
	id := upid("qmstart", "100")
	ft := f.task(id, 2, "OK")
	ft.echo = "x"
	res, err := f.client(t).WaitTask(bg, TaskRef{UPID: id, Node: "pve"}, fastWait)
	if err != nil || !res.OK {
		t.Fatalf("res %+v err %v", res, err)
	}
	if ft.pollCount() != 3 {
		t.Errorf("polls = %d, want 3", ft.pollCount())
	}
}

func TestWaitTaskSynchronous(t *testing.T) {
	f := newFake(t)
	c := f.client(t)
	res, err := c.WaitTask(bg, TaskRef{}, fastWait)
	if err != nil || !res.OK {
		t.Errorf("zero TaskRef: %+v, %v", res, err)
	}
	if c.Calls() != 0 {
		t.Errorf("Calls = %d, want 0", c.Calls())
	}
}

func TestWaitTaskContextCancel(t *testing.T) {
	f := newFake(t)
	id := upid("qmclone", "9000")
	f.task(id, 1<<30, "OK") // never ends
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	var polls atomic.Int32
	opts := fastWait
	opts.OnPoll = func() {
		if polls.Add(1) == 3 {
			cancel()
		}
	}
	res, err := f.client(t).WaitTask(ctx, TaskRef{UPID: id, Node: "pve"}, opts)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	var pe *Error
	if errors.As(err, &pe) {
		t.Errorf("a cancelled wait must not claim an outcome, got %+v", pe)
	}
	if res.OK || res.ExitStatus != "" || res.UPID != id {
		t.Errorf("result = %+v", res)
	}
}

func TestWaitTaskPollErrors(t *testing.T) {
	t.Run("transient poll errors are tolerated", func(t *testing.T) {
		f := newFake(t)
		id := upid("qmstart", "100")
		f.task(id, 0, "OK")
		var n atomic.Int32
		okHandler := f.handler(http.MethodGet, "/nodes/pve/tasks/"+id+"/status")
		f.on(http.MethodGet, "/nodes/pve/tasks/"+id+"/status", func(w http.ResponseWriter, r *http.Request) {
			if n.Add(1) <= 2 {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			okHandler(w, r)
		})
		res, err := f.client(t).WaitTask(bg, TaskRef{UPID: id, Node: "pve"}, fastWait)
		if err != nil || !res.OK {
			t.Errorf("res %+v err %v", res, err)
		}
	})
	t.Run("too many poll errors give up, classified", func(t *testing.T) {
		f := newFake(t)
		id := upid("qmstart", "100")
		f.on(http.MethodGet, "/nodes/pve/tasks/"+id+"/status", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusServiceUnavailable)
		})
		opts := fastWait
		opts.MaxPollErrors = 2
		_, err := f.client(t).WaitTask(bg, TaskRef{UPID: id, Node: "pve"}, opts)
		if e := asError(t, err); e.Class != ClassTransient || e.Op != OpTaskStatus {
			t.Errorf("error = %+v", e)
		}
		if n := f.count(http.MethodGet, "/nodes/pve/tasks/"+id+"/status"); n != 3 {
			t.Errorf("polled %d times, want 3", n)
		}
	})
	t.Run("unknown task is gone", func(t *testing.T) {
		f := newFake(t)
		id := upid("qmstart", "100")
		f.on(http.MethodGet, "/nodes/pve/tasks/"+id+"/status", func(w http.ResponseWriter, _ *http.Request) {
			pveErrorBody(w, 400, "Parameter verification failed.", map[string]string{"upid": "no such task"})
		})
		_, err := f.client(t).WaitTask(bg, TaskRef{UPID: id, Node: "pve"}, fastWait)
		if Classify(err) != ClassGone || !errors.Is(err, ErrGone) {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("malformed UPID is terminal and not sent", func(t *testing.T) {
		f := newFake(t)
		_, err := f.client(t).WaitTask(bg, TaskRef{UPID: "UPID:pve:bogus"}, fastWait)
		if Classify(err) != ClassTerminal || len(f.requests()) != 0 {
			t.Errorf("err = %v, %d requests", err, len(f.requests()))
		}
	})
	t.Run("log unavailable still reports the failure", func(t *testing.T) {
		f := newFake(t)
		id := upid("qmstart", "100")
		f.task(id, 0, "VM 100 already running")
		f.on(http.MethodGet, "/nodes/pve/tasks/"+id+"/log", func(w http.ResponseWriter, _ *http.Request) {
			pveError(w, 500, "log gone")
		})
		res, err := f.client(t).WaitTask(bg, TaskRef{UPID: id, Node: "pve"}, fastWait)
		if Classify(err) != ClassAlreadyDone || res.Log != nil {
			t.Errorf("res %+v err %v", res, err)
		}
	})
}

func TestTaskLogKeepsTail(t *testing.T) {
	f := newFake(t)
	id := upid("qmclone", "9000")
	lines := make([]string, 120)
	for i := range lines {
		lines[i] = "line " + strings.Repeat("x", i%3)
	}
	lines[119] = "TASK ERROR: boom"
	f.task(id, 0, "boom", lines...)
	opts := fastWait
	opts.LogLines = 10
	res, _ := f.client(t).WaitTask(bg, TaskRef{UPID: id, Node: "pve"}, opts)
	if len(res.Log) != 10 || res.Log[9] != "TASK ERROR: boom" {
		t.Errorf("log tail = %q", res.Log)
	}
	if q := f.last().Query; q.Get("start") != "0" || q.Get("limit") == "" {
		t.Errorf("log query = %v", q)
	}
}

func TestVerifyPower(t *testing.T) {
	f := newFake(t)
	f.onData(http.MethodGet, "/nodes/pve/qemu/100/status/current", `{"vmid":100,"status":"stopped","uptime":0,"ha":{"managed":1}}`)
	c := f.client(t)
	if err := c.VerifyPower(bg, vm100, "stopped"); err != nil {
		t.Errorf("stopped: %v", err)
	}
	err := c.VerifyPower(bg, vm100, "running")
	if e := asError(t, err); e.Class != ClassTransient || e.Op != OpVerifyPower || !strings.Contains(e.Message, "stopped") {
		t.Errorf("running: %+v", e)
	}
	if err := c.VerifyPower(bg, vm100, "paused"); Classify(err) != ClassTerminal {
		t.Errorf("bad want: %v", err)
	}
}

func TestWaitOptionsDefaults(t *testing.T) {
	got := WaitOptions{}.withDefaults()
	if got.Interval != 20*time.Millisecond || got.MaxInterval != time.Second || got.LogLines != 50 || got.MaxPollErrors != 5 {
		t.Errorf("defaults = %+v", got)
	}
	if got := (WaitOptions{Interval: 2 * time.Second}).withDefaults(); got.MaxInterval != 2*time.Second {
		t.Errorf("MaxInterval below Interval not raised: %+v", got)
	}
}
