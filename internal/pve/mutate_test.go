package pve

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

var (
	vm100 = GuestRef{Kind: KindQEMU, Node: "pve", VMID: 100}
	ct200 = GuestRef{Kind: KindLXC, Node: "pve", VMID: 200}
)

func upid(typ, id string) string {
	return testUPIDPrefix + typ + ":" + id + ":root@pam!converge:"
}

func TestMutationsSendOneRequestAndReturnTask(t *testing.T) {
	full := true
	for _, tc := range []struct {
		name       string
		call       func(c *Client) (TaskRef, error)
		method     string
		path       string
		answer     string // JSON data
		wantBody   map[string]any
		wantQuery  map[string]string
		wantTask   TaskRef
		noneInBody []string
	}{
		{
			name:   "qemu start",
			call:   func(c *Client) (TaskRef, error) { return c.Start(bg, vm100) },
			method: http.MethodPost, path: "/nodes/pve/qemu/100/status/start",
			answer:   `"` + upid("qmstart", "100") + `"`,
			wantBody: map[string]any{},
			wantTask: TaskRef{UPID: upid("qmstart", "100"), Node: "pve"},
		},
		{
			name:   "lxc stop",
			call:   func(c *Client) (TaskRef, error) { return c.Stop(bg, ct200) },
			method: http.MethodPost, path: "/nodes/pve/lxc/200/status/stop",
			answer:   `"` + upid("vzstop", "200") + `"`,
			wantBody: map[string]any{},
			wantTask: TaskRef{UPID: upid("vzstop", "200"), Node: "pve"},
		},
		{
			name:   "lxc shutdown without timeout sends the default, never 0",
			call:   func(c *Client) (TaskRef, error) { return c.Shutdown(bg, ct200, 0, false) },
			method: http.MethodPost, path: "/nodes/pve/lxc/200/status/shutdown",
			answer:   `"` + upid("vzshutdown", "200") + `"`,
			wantBody: map[string]any{"timeout": "60", "forceStop": "0"},
			wantTask: TaskRef{UPID: upid("vzshutdown", "200"), Node: "pve"},
		},
		{
			name:   "qemu shutdown rounds timeout up, forceStop 1",
			call:   func(c *Client) (TaskRef, error) { return c.Shutdown(bg, vm100, 1500*time.Millisecond, true) },
			method: http.MethodPost, path: "/nodes/pve/qemu/100/status/shutdown",
			answer:   `"` + upid("qmshutdown", "100") + `"`,
			wantBody: map[string]any{"timeout": "2", "forceStop": "1"},
			wantTask: TaskRef{UPID: upid("qmshutdown", "100"), Node: "pve"},
		},
		{
			name:   "qemu reboot: a clean reboot bounded by its shutdown timeout",
			call:   func(c *Client) (TaskRef, error) { return c.Reboot(bg, vm100, 90*time.Second) },
			method: http.MethodPost, path: "/nodes/pve/qemu/100/status/reboot",
			answer:   `"` + upid("qmreboot", "100") + `"`,
			wantBody: map[string]any{"timeout": "90"},
			wantTask: TaskRef{UPID: upid("qmreboot", "100"), Node: "pve"},
		},
		{
			name: "qemu config without drives: the synchronous PUT",
			call: func(c *Client) (TaskRef, error) {
				return c.UpdateConfig(bg, vm100, ConfigChange{
					Set:    map[string]string{"cores": "4", "tags": "Web,prod web", "memory": "current=4096", "description": "", "onboot": "1"},
					Delete: []string{"balloon"},
					Digest: "0a1b2c",
				})
			},
			method: http.MethodPut, path: "/nodes/pve/qemu/100/config",
			answer: `null`,
			wantBody: map[string]any{"cores": "4", "tags": "prod;web", "memory": "4096", "onboot": "1",
				"delete": "balloon,description", "digest": "0a1b2c"},
			wantTask:   TaskRef{},
			noneInBody: []string{"background_delay"},
		},
		{
			name: "qemu config of a drive: POST, null answer is a synchronous success",
			call: func(c *Client) (TaskRef, error) {
				return c.UpdateConfig(bg, vm100, ConfigChange{Set: map[string]string{"scsi1": "local-lvm:2", "cores": "2"}, Digest: "0a1b2c"})
			},
			method: http.MethodPost, path: "/nodes/pve/qemu/100/config",
			answer:   `null`,
			wantBody: map[string]any{"scsi1": "local-lvm:2", "cores": "2", "digest": "0a1b2c", "background_delay": "5"},
			wantTask: TaskRef{},
		},
		{
			name: "qemu config POST returning a task",
			call: func(c *Client) (TaskRef, error) {
				return c.UpdateConfig(bg, vm100, ConfigChange{Delete: []string{"unused0"}})
			},
			method: http.MethodPost, path: "/nodes/pve/qemu/100/config",
			answer:     `"` + upid("qmconfig", "100") + `"`,
			wantBody:   map[string]any{"delete": "unused0", "background_delay": "5"},
			wantTask:   TaskRef{UPID: upid("qmconfig", "100"), Node: "pve"},
			noneInBody: []string{"digest"},
		},
		{
			name: "lxc config PUT, name becomes hostname, empty tags delete",
			call: func(c *Client) (TaskRef, error) {
				return c.UpdateConfig(bg, ct200, ConfigChange{Set: map[string]string{"name": "db02", "tags": " ; "}, Digest: "ff"})
			},
			method: http.MethodPut, path: "/nodes/pve/lxc/200/config",
			answer:   `null`,
			wantBody: map[string]any{"hostname": "db02", "delete": "tags", "digest": "ff"},
			wantTask: TaskRef{},
		},
		{
			name: "qemu clone",
			call: func(c *Client) (TaskRef, error) {
				return c.Clone(bg, GuestRef{Kind: KindQEMU, Node: "pve", VMID: 9000},
					CloneSpec{NewID: 101, Name: "web02", TargetNode: "pve2", Full: &full, Storage: "ceph", Description: "from template", Pool: "prod"})
			},
			method: http.MethodPost, path: "/nodes/pve/qemu/9000/clone",
			answer: `"` + upid("qmclone", "9000") + `"`,
			wantBody: map[string]any{"newid": "101", "name": "web02", "target": "pve2", "full": "1",
				"storage": "ceph", "description": "from template", "pool": "prod"},
			wantTask: TaskRef{UPID: upid("qmclone", "9000"), Node: "pve"},
		},
		{
			name: "lxc clone uses hostname, same-node target omitted",
			call: func(c *Client) (TaskRef, error) {
				return c.Clone(bg, ct200, CloneSpec{NewID: 201, Name: "db02", TargetNode: "pve"})
			},
			method: http.MethodPost, path: "/nodes/pve/lxc/200/clone",
			answer:     `"` + upid("vzclone", "200") + `"`,
			wantBody:   map[string]any{"newid": "201", "hostname": "db02"},
			wantTask:   TaskRef{UPID: upid("vzclone", "200"), Node: "pve"},
			noneInBody: []string{"name", "target", "full", "pool"},
		},
		{
			name:   "lxc delete purge force",
			call:   func(c *Client) (TaskRef, error) { return c.Delete(bg, ct200, true, true) },
			method: http.MethodDelete, path: "/nodes/pve/lxc/200",
			answer:    `"` + upid("vzdestroy", "200") + `"`,
			wantQuery: map[string]string{"purge": "1", "force": "1"},
			wantTask:  TaskRef{UPID: upid("vzdestroy", "200"), Node: "pve"},
		},
		{
			name:   "destroy purges and destroys unreferenced disks",
			call:   func(c *Client) (TaskRef, error) { return c.Destroy(bg, vm100) },
			method: http.MethodDelete, path: "/nodes/pve/qemu/100",
			answer:    `"` + upid("qmdestroy", "100") + `"`,
			wantQuery: map[string]string{"purge": "1", "destroy-unreferenced-disks": "1", "force": ""},
			wantTask:  TaskRef{UPID: upid("qmdestroy", "100"), Node: "pve"},
		},
		{
			name:   "qemu delete ignores force",
			call:   func(c *Client) (TaskRef, error) { return c.Delete(bg, vm100, true, true) },
			method: http.MethodDelete, path: "/nodes/pve/qemu/100",
			answer:    `"` + upid("qmdestroy", "100") + `"`,
			wantQuery: map[string]string{"purge": "1", "force": ""},
			wantTask:  TaskRef{UPID: upid("qmdestroy", "100"), Node: "pve"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			f.onData(tc.method, tc.path, tc.answer)
			c := f.client(t)
			got, err := tc.call(c)
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			if got != tc.wantTask {
				t.Errorf("TaskRef = %+v, want %+v", got, tc.wantTask)
			}
			reqs := f.requests()
			if len(reqs) != 1 {
				t.Fatalf("sent %d requests, want exactly 1", len(reqs))
			}
			r := reqs[0]
			if r.Method != tc.method || r.Path != tc.path {
				t.Errorf("request %s %s, want %s %s", r.Method, r.Path, tc.method, tc.path)
			}
			if tc.wantBody != nil {
				got := map[string]any{}
				for k, v := range r.Body {
					got[k] = v
				}
				if !equalMaps(got, tc.wantBody) {
					t.Errorf("body = %v, want %v", got, tc.wantBody)
				}
			}
			for _, k := range tc.noneInBody {
				if _, ok := r.Body[k]; ok {
					t.Errorf("body has %q", k)
				}
			}
			for k, v := range tc.wantQuery {
				if r.Query.Get(k) != v {
					t.Errorf("query %s = %q, want %q", k, r.Query.Get(k), v)
				}
			}
			if c.Calls() != 1 {
				t.Errorf("Calls = %d, want 1", c.Calls())
			}
		})
	}
}

func equalMaps(a, b map[string]any) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestMutationErrorsClassified(t *testing.T) {
	for _, tc := range []struct {
		name   string
		call   func(c *Client) (TaskRef, error)
		method string
		path   string
		serve  http.HandlerFunc
		class  Class
		status int
		msg    string
	}{
		{"lxc start already running", func(c *Client) (TaskRef, error) { return c.Start(bg, ct200) },
			http.MethodPost, "/nodes/pve/lxc/200/status/start",
			func(w http.ResponseWriter, _ *http.Request) { pveError(w, 500, "CT 200 already running") },
			ClassAlreadyDone, 500, "CT 200 already running"},
		{"lxc stop not running", func(c *Client) (TaskRef, error) { return c.Stop(bg, ct200) },
			http.MethodPost, "/nodes/pve/lxc/200/status/stop",
			func(w http.ResponseWriter, _ *http.Request) { pveError(w, 500, "CT 200 not running") },
			ClassAlreadyDone, 500, "CT 200 not running"},
		{"lxc shutdown not running", func(c *Client) (TaskRef, error) { return c.Shutdown(bg, ct200, time.Minute, false) },
			http.MethodPost, "/nodes/pve/lxc/200/status/shutdown",
			func(w http.ResponseWriter, _ *http.Request) { pveError(w, 500, "CT 200 not running") },
			ClassAlreadyDone, 500, "CT 200 not running"},
		{"reboot of stopped VM", func(c *Client) (TaskRef, error) { return c.Reboot(bg, vm100, 0) },
			http.MethodPost, "/nodes/pve/qemu/100/status/reboot",
			func(w http.ResponseWriter, _ *http.Request) { pveError(w, 500, "VM 100 not running") },
			ClassTerminal, 500, "VM 100 not running"},
		{"config digest mismatch (qemu)", func(c *Client) (TaskRef, error) {
			return c.UpdateConfig(bg, vm100, ConfigChange{Set: map[string]string{"cores": "2"}, Digest: "old"})
		}, http.MethodPut, "/nodes/pve/qemu/100/config",
			func(w http.ResponseWriter, _ *http.Request) {
				pveError(w, 500, "checksum mismatch (file change by other user?)")
			},
			ClassConflict, 500, "checksum mismatch (file change by other user?)"},
		// A task that failed within background_delay fails the request with
		// the task's exit status; it classifies as the task would.
		{"qemu config task failed within the wait", func(c *Client) (TaskRef, error) {
			return c.UpdateConfig(bg, vm100, ConfigChange{Set: map[string]string{"scsi1": "local-lvm:2"}})
		}, http.MethodPost, "/nodes/pve/qemu/100/config",
			func(w http.ResponseWriter, _ *http.Request) {
				pveError(w, 500, "failed to update VM 100: can't lock file '/var/lock/qemu-server/lock-100.conf' - got timeout")
			},
			ClassLocked, 500, "failed to update VM 100: can't lock file '/var/lock/qemu-server/lock-100.conf' - got timeout"},
		{"config digest mismatch (lxc)", func(c *Client) (TaskRef, error) {
			return c.UpdateConfig(bg, ct200, ConfigChange{Set: map[string]string{"cores": "2"}, Digest: "old"})
		}, http.MethodPut, "/nodes/pve/lxc/200/config",
			func(w http.ResponseWriter, _ *http.Request) {
				pveError(w, 500, "detected modified configuration - file changed by other user? Try again.")
			},
			ClassConflict, 500, "detected modified configuration - file changed by other user? Try again."},
		{"config on locked CT", func(c *Client) (TaskRef, error) {
			return c.UpdateConfig(bg, ct200, ConfigChange{Set: map[string]string{"cores": "2"}})
		}, http.MethodPut, "/nodes/pve/lxc/200/config",
			func(w http.ResponseWriter, _ *http.Request) { pveError(w, 500, "CT is locked (backup)") },
			ClassLocked, 500, "CT is locked (backup)"},
		{"flock contention", func(c *Client) (TaskRef, error) { return c.Start(bg, vm100) },
			http.MethodPost, "/nodes/pve/qemu/100/status/start",
			func(w http.ResponseWriter, _ *http.Request) {
				pveError(w, 500, "can't lock file '/var/lock/qemu-server/lock-100.conf' - got timeout")
			},
			ClassLocked, 500, "can't lock file '/var/lock/qemu-server/lock-100.conf' - got timeout"},
		{"parameter verification", func(c *Client) (TaskRef, error) {
			return c.UpdateConfig(bg, vm100, ConfigChange{Set: map[string]string{"cores": "x"}})
		}, http.MethodPut, "/nodes/pve/qemu/100/config",
			func(w http.ResponseWriter, _ *http.Request) {
				pveErrorBody(w, 400, "Parameter verification failed.", map[string]string{"cores": "type check ('integer') failed - got 'x'\n"})
			},
			ClassTerminal, 400, "Parameter verification failed. (cores: type check ('integer') failed - got 'x')"},
		{"clone onto existing vmid", func(c *Client) (TaskRef, error) {
			return c.Clone(bg, vm100, CloneSpec{NewID: 101})
		}, http.MethodPost, "/nodes/pve/qemu/100/clone",
			func(w http.ResponseWriter, _ *http.Request) {
				pveErrorBody(w, 400, "Parameter verification failed.", map[string]string{"newid": "VM 101 already exists"})
			},
			ClassConflict, 400, "Parameter verification failed. (newid: VM 101 already exists)"},
		{"delete running VM", func(c *Client) (TaskRef, error) { return c.Delete(bg, vm100, false, false) },
			http.MethodDelete, "/nodes/pve/qemu/100",
			func(w http.ResponseWriter, _ *http.Request) { pveError(w, 500, "VM 100 is running - destroy failed") },
			ClassTerminal, 500, "VM 100 is running - destroy failed"},
		{"unknown path", func(c *Client) (TaskRef, error) { return c.Start(bg, vm100) },
			http.MethodPost, "/nope", nil, // fake answers 501
			ClassTerminal, 501, "Method 'POST /nodes/pve/qemu/100/status/start' not implemented"},
		{"595 with data:null is not a synchronous success", func(c *Client) (TaskRef, error) {
			return c.UpdateConfig(bg, ct200, ConfigChange{Set: map[string]string{"cores": "2"}})
		}, http.MethodPut, "/nodes/pve/lxc/200/config",
			func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(595)
				_, _ = w.Write([]byte(`{"data":null}`))
			},
			ClassTransient, 595, "status code 595"}, // net/http's reason for unknown codes
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			if tc.serve != nil {
				f.on(tc.method, tc.path, tc.serve)
			}
			task, err := tc.call(f.client(t))
			e := asError(t, err)
			if !task.IsZero() {
				t.Errorf("TaskRef = %+v on error", task)
			}
			if e.Class != tc.class || e.Status != tc.status || e.Message != tc.msg {
				t.Errorf("got class %v status %d msg %q; want %v %d %q", e.Class, e.Status, e.Message, tc.class, tc.status, tc.msg)
			}
			if !errors.Is(err, tc.class.Sentinel()) {
				t.Errorf("errors.Is(err, %v sentinel) = false", tc.class)
			}
			if e.Indeterminate {
				t.Error("PVE answered: outcome is not indeterminate")
			}
			if n := len(f.requests()); n != 1 {
				t.Errorf("sent %d requests, want 1 (mutations are never retried)", n)
			}
		})
	}
}

func TestMutationOutcomeUnknown(t *testing.T) {
	t.Run("connection dropped after the request arrived", func(t *testing.T) {
		f := newFake(t)
		f.on(http.MethodPost, "/nodes/pve/qemu/100/status/start", dropConnection)
		_, err := f.client(t).Start(bg, vm100)
		e := asError(t, err)
		if e.Class != ClassTransient || !e.Indeterminate {
			t.Errorf("got %+v, want transient and indeterminate", e)
		}
		if n := f.count(http.MethodPost, "/nodes/pve/qemu/100/status/start"); n != 1 {
			t.Errorf("start sent %d times, want 1", n)
		}
	})
	t.Run("gateway error", func(t *testing.T) {
		f := newFake(t)
		f.on(http.MethodPost, "/nodes/pve/qemu/100/status/start", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte("<html>bad gateway</html>"))
		})
		_, err := f.client(t).Start(bg, vm100)
		e := asError(t, err)
		if e.Class != ClassTransient || !e.Indeterminate || e.Status != 502 || e.Message != "Bad Gateway" {
			t.Errorf("got %+v", e)
		}
	})
	t.Run("server down: nothing was sent", func(t *testing.T) {
		f := newFake(t)
		c := f.client(t)
		f.srv.Close()
		_, err := c.Start(bg, vm100)
		e := asError(t, err)
		if e.Class != ClassTransient || e.Indeterminate {
			t.Errorf("got %+v, want transient, not indeterminate", e)
		}
	})
	t.Run("context already cancelled: nothing was sent", func(t *testing.T) {
		f := newFake(t)
		ctx, cancel := contextWithCancel()
		cancel()
		_, err := f.client(t).Stop(ctx, vm100)
		e := asError(t, err)
		if e.Class != ClassTransient || e.Indeterminate || len(f.requests()) != 0 {
			t.Errorf("got %+v after %d requests", e, len(f.requests()))
		}
	})
	t.Run("answer that is neither UPID nor null", func(t *testing.T) {
		f := newFake(t)
		f.onData(http.MethodPost, "/nodes/pve/qemu/100/status/start", `{"weird":1}`)
		_, err := f.client(t).Start(bg, vm100)
		e := asError(t, err)
		if e.Class != ClassUnknown || !e.Indeterminate {
			t.Errorf("got %+v", e)
		}
	})
}

func TestConfigChangeValidation(t *testing.T) {
	f := newFake(t)
	c := f.client(t)
	for _, ch := range []ConfigChange{
		{Set: map[string]string{"digest": "x"}},
		{Set: map[string]string{"delete": "x"}},
		{Set: map[string]string{"Bad Key": "x"}},
		{Set: map[string]string{"cores": "2"}, Delete: []string{"cores"}},
		{Set: map[string]string{"memory": "lots"}},
		{Delete: []string{"vmid"}},
	} {
		if _, err := c.UpdateConfig(bg, vm100, ch); Classify(err) != ClassTerminal {
			t.Errorf("UpdateConfig(%+v) class = %v (%v), want terminal", ch, Classify(err), err)
		}
	}
	// Nothing to change: nothing sent.
	if task, err := c.UpdateConfig(bg, vm100, ConfigChange{Digest: "x"}); err != nil || !task.IsZero() {
		t.Errorf("empty change = %+v, %v", task, err)
	}
	if _, err := c.Clone(bg, vm100, CloneSpec{}); Classify(err) != ClassTerminal {
		t.Errorf("clone without NewID: %v", err)
	}
	if _, err := c.Clone(bg, vm100, CloneSpec{NewID: 101, TargetNode: "a/b"}); Classify(err) != ClassTerminal {
		t.Errorf("clone to bad node: %v", err)
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("%d requests sent for invalid changes", n)
	}
}

func TestDecodeTaskRef(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    TaskRef
		wantErr bool
	}{
		{``, TaskRef{}, false},
		{`null`, TaskRef{}, false},
		{`""`, TaskRef{}, false},
		{`"UPID:pve2:000137B5:00112EB4:6991F9E1:vzcreate:300:root@pam!opentofu:"`,
			TaskRef{UPID: "UPID:pve2:000137B5:00112EB4:6991F9E1:vzcreate:300:root@pam!opentofu:", Node: "pve2"}, false},
		{`"not-a-upid"`, TaskRef{}, true},
		{`42`, TaskRef{}, true},
	} {
		got, err := decodeTaskRef([]byte(tc.in), "fallback")
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("decodeTaskRef(%s) = %+v, %v", tc.in, got, err)
		}
	}
	if !strings.HasSuffix(upid("qmstart", "100"), ":") {
		t.Fatal("test UPIDs must end in ':' like PVE's")
	}
}
