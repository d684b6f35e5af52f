package pve

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"

	proxmox "github.com/luthermonson/go-proxmox"
)

func TestClassifyOpMessage(t *testing.T) {
	for _, tc := range []struct {
		op     Op
		status int
		msg    string
		want   Class
	}{
		// Already done, depending on the operation.
		{OpStart, 500, "VM 100 already running", ClassAlreadyDone},
		{OpStart, 500, "CT 100 already running", ClassAlreadyDone},
		{OpStart, 0, "VM 100 already running", ClassAlreadyDone}, // QEMU: task exit status
		{OpStop, 500, "CT 100 not running", ClassAlreadyDone},
		{OpShutdown, 500, "CT 100 not running", ClassAlreadyDone},
		{OpReboot, 500, "VM 100 not running", ClassTerminal},
		{OpUnknown, 500, "VM 100 not running", ClassTerminal},
		{OpUnknown, 500, "VM 100 already running", ClassAlreadyDone},
		{OpDelete, 500, "VM 100 already running", ClassTerminal},
		// Gone.
		{OpReadConfig, 500, "Configuration file 'nodes/pve/qemu-server/999.conf' does not exist", ClassGone},
		{OpReadConfig, 500, "Configuration file 'nodes/pve/lxc/999.conf' does not exist", ClassGone},
		{OpUnknown, 500, "no such VM ('999')", ClassGone},
		{OpTaskStatus, 400, "Parameter verification failed. (upid: no such task)", ClassGone},
		// Locks.
		{OpUpdateConfig, 500, "VM is locked (backup)", ClassLocked},
		{OpUpdateConfig, 500, "CT is locked (snapshot)", ClassLocked},
		{OpDelete, 0, "VM is locked (clone)", ClassLocked},
		{OpUpdateConfig, 500, "can't lock file '/var/lock/qemu-server/lock-100.conf' - got timeout", ClassLocked},
		{OpStart, 0, "can't lock file '/var/lock/lxc/pve-config-100.lock' - got timeout", ClassLocked},
		{OpUpdateConfig, 500, "cfs-lock 'storage-local-lvm' error: got lock request timeout", ClassLocked},
		{OpStart, 500, "trying to acquire cfs lock 'file-replication_cfg' ...", ClassLocked},
		// Conflicts.
		{OpUpdateConfig, 500, "checksum mismatch (file change by other user?)", ClassConflict},
		{OpUpdateConfig, 500, "detected modified configuration - file changed by other user? Try again.", ClassConflict},
		{OpClone, 400, "Parameter verification failed. (newid: VM 101 already exists)", ClassConflict},
		// Terminal.
		{OpUpdateConfig, 400, `Parameter verification failed. - {"cores":"type check ('integer') failed - got 'x'"}`, ClassTerminal},
		{OpUnknown, 501, "Method 'GET /nodes/pve/foo' not implemented", ClassTerminal},
		{OpDelete, 500, "VM 100 is running - destroy failed", ClassTerminal},
		{OpDelete, 500, "unable to destroy CT 100 - container is running", ClassTerminal},
		{OpShutdown, 500, "VM is paused - cannot shutdown", ClassTerminal},
		// A VM that ignored a reboot's ACPI request: Proxmox does not
		// force it, asking again does nothing. A shutdown's timeout is
		// transient (it is forced when forceStop is given).
		{OpReboot, 0, "VM quit/powerdown failed - got timeout", ClassTerminal},
		{OpShutdown, 0, "VM quit/powerdown failed - got timeout", ClassTransient},
		{OpClone, 500, "storage 'fast' does not exist", ClassTerminal},
		{OpStart, 0, "bridge 'vmbr9' does not exist", ClassTerminal},
		{OpStart, 0, "volume 'local-lvm:vm-100-disk-0' does not exist", ClassTerminal},
		{OpUnknown, 500, "VM 100 does not exist", ClassGone},
		{OpUnknown, 500, "hostname lookup 'pve9' failed - failed to get address info for: pve9: Name or service not known", ClassTerminal},
		// destroy_vm and clone_vm refusals, the missing pool's 403, HA removal.
		{OpDelete, 500, "can't remove VM 100 - protection mode enabled", ClassTerminal},
		{OpDelete, 500, "unable to remove CT 100 - used in HA resources and purge parameter not set.", ClassTerminal},
		{OpClone, 500, "parameter 'storage' not allowed for linked clones", ClassTerminal},
		{OpClone, 500, "can't clone to non-shared storage 'local-lvm'", ClassTerminal},
		{OpClone, 500, "can't clone VM to node 'pve2' (VM uses local storage)", ClassTerminal},
		{OpClone, 500, "Linked clone feature is not supported for 'local-lvm:vm-100-disk-0' (scsi0)", ClassTerminal},
		{OpClone, 500, "Full clone of a running container is only possible from a snapshot", ClassTerminal},
		{OpClone, 500, "no such cluster node 'pve9'", ClassTerminal},
		{OpClone, 403, "Permission check failed (pool 'nope' does not exist)", ClassTerminal},
		{OpClone, 403, "Permission check failed (/vms/100, VM.Clone)", ClassUnauthorized},
		{OpClone, 0, "clone failed: cfs-lock 'storage-ceph' error: got lock request timeout", ClassLocked},
		{OpClone, 0, "clone failed: can't lock file '/var/lock/pve-manager/pve-storage-local-lvm' - got timeout", ClassLocked},
		{OpClone, 500, "CT 105 already exists on node 'pve1'", ClassConflict},
		{OpRemoveHA, 500, "cannot delete service 'vm:100', not HA managed!", ClassAlreadyDone},
		// Transient.
		{OpShutdown, 0, "VM quit/powerdown failed - got timeout", ClassTransient},
		{OpShutdown, 0, "container did not stop", ClassTransient},
		{OpUnknown, 502, "Bad Gateway", ClassTransient},
		{OpUnknown, 503, "Service Unavailable", ClassTransient},
		{OpUnknown, 504, "Gateway Timeout", ClassTransient},
		{OpUnknown, 595, "Connection refused", ClassTransient},
		{OpUnknown, 595, "no route to host", ClassTransient},
		{OpUnknown, 596, "Connection timed out", ClassTransient},
		{OpUnknown, 500, "node 'pve2' seems to be offline", ClassTransient},
		// Unauthorized.
		{OpUnknown, 401, "No ticket", ClassUnauthorized},
		{OpUnknown, 401, "invalid token value!", ClassUnauthorized},
		{OpUnknown, 403, "Permission check failed (/vms/100, VM.PowerMgmt)", ClassUnauthorized},
		{OpLogin, 401, "authentication failure", ClassUnauthorized},
		// Unknown.
		{OpUnknown, 500, "something nobody has seen before", ClassUnknown},
		{OpStart, 0, "unexpected status", ClassUnknown},
	} {
		if got := ClassifyOpMessage(tc.op, tc.status, tc.msg); got != tc.want {
			t.Errorf("ClassifyOpMessage(%q, %d, %q) = %v, want %v", tc.op, tc.status, tc.msg, got, tc.want)
		}
	}
	if got := ClassifyOpMessage(OpUnknown, 500, "CT 100 not running"); got != ClassTerminal {
		t.Errorf("ClassifyOpMessage without op: not running = %v, want terminal", got)
	}
}

func TestClassifyErrors(t *testing.T) {
	timeoutErr := &url.Error{Op: "Get", URL: "https://pve:8006/api2/json/version", Err: &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}}
	for _, tc := range []struct {
		name string
		err  error
		want Class
	}{
		// go-proxmox's own error texts.
		{"go-proxmox 500 already running", errors.New("500 VM 100 already running"), ClassAlreadyDone},
		{"go-proxmox 500 does not exist", errors.New("500 Configuration file 'nodes/pve/qemu-server/999.conf' does not exist"), ClassGone},
		{"go-proxmox 400", errors.New(`bad request: 400 Parameter verification failed. - {"cores":"type check ('integer') failed - got 'x'"}`), ClassTerminal},
		{"go-proxmox 501", errors.New("501 Method 'GET /x' not implemented"), ClassTerminal},
		{"go-proxmox 500 locked", errors.New("500 VM is locked (backup)"), ClassLocked},
		{"go-proxmox 500 flock", errors.New("500 can't lock file '/var/lock/qemu-server/lock-100.conf' - got timeout"), ClassLocked},
		{"go-proxmox 500 checksum", errors.New("500 checksum mismatch (file change by other user?)"), ClassConflict},
		{"go-proxmox 500 bare", errors.New("500 Internal Server Error"), ClassUnknown},
		{"ErrNotAuthorized", proxmox.ErrNotAuthorized, ClassUnauthorized},
		{"wrapped ErrNotAuthorized", fmt.Errorf("x: %w", proxmox.ErrNotAuthorized), ClassUnauthorized},
		{"ErrTimeout", proxmox.ErrTimeout, ClassTransient},
		// Network.
		{"EOF", io.EOF, ClassTransient},
		{"unexpected EOF", &url.Error{Op: "Post", URL: "u", Err: io.ErrUnexpectedEOF}, ClassTransient},
		{"refused", &url.Error{Op: "Get", URL: "u", Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}, ClassTransient},
		{"reset", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, ClassTransient},
		{"timeout", timeoutErr, ClassTransient},
		{"dns", &net.DNSError{Err: "no such host", Name: "pve", IsNotFound: true}, ClassTransient},
		{"context canceled", context.Canceled, ClassTransient},
		{"deadline", fmt.Errorf("wait: %w", context.DeadlineExceeded), ClassTransient},
		// Trust.
		{"unknown authority", &url.Error{Op: "Get", URL: "u", Err: x509.UnknownAuthorityError{}}, ClassUnauthorized},
		{"pin mismatch", &url.Error{Op: "Get", URL: "u", Err: &fingerprintMismatchError{got: "ab"}}, ClassUnauthorized},
		// Ours.
		{"statusError", &url.Error{Op: "Post", URL: "u", Err: &statusError{Code: 500, Reason: "CT 100 already running"}}, ClassAlreadyDone},
		{"statusError canonical reason, body message", &statusError{Code: 500, Reason: "Internal Server Error", Body: "VM is locked (backup)"}, ClassLocked},
		{"*Error keeps class", fmt.Errorf("outer: %w", &Error{Class: ClassConflict}), ClassConflict},
		// A malformed answer, truncated too: not a network fault.
		{"malformed answer", answerError(`{"data":[1,}`), ClassUnknown},
		{"truncated answer", answerError(`{"data":[1,`), ClassUnknown},
		{"mistyped answer", func() error { _, err := decodeAnswer[[]int]([]byte(`{"data":{}}`)); return err }(), ClassUnknown},
		{"nil", nil, ClassUnknown},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("%s: Classify(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// answerError is the error of decoding a malformed answer.
func answerError(body string) error {
	_, err := decodeAnswer[Value]([]byte(body))
	return err
}

func TestErrorSentinelsAndText(t *testing.T) {
	sentinels := map[Class]error{
		ClassUnknown: ErrUnknown, ClassTransient: ErrTransient, ClassLocked: ErrLocked,
		ClassAlreadyDone: ErrAlreadyDone, ClassGone: ErrGone, ClassTerminal: ErrTerminal,
		ClassConflict: ErrConflict, ClassUnauthorized: ErrUnauthorized,
	}
	cause := errors.New("cause")
	for class, sentinel := range sentinels {
		err := fmt.Errorf("executor: %w", &Error{Class: class, Op: OpStart, Err: cause})
		for other, s := range sentinels {
			if got := errors.Is(err, s); got != (other == class) {
				t.Errorf("errors.Is(%v error, %v sentinel) = %v", class, other, got)
			}
		}
		if !errors.Is(err, cause) {
			t.Errorf("%v: Unwrap lost the cause", class)
		}
		if class.Sentinel() != sentinel {
			t.Errorf("%v.Sentinel() mismatch", class)
		}
	}
	e := &Error{Class: ClassLocked, Op: OpUpdateConfig, Ref: GuestRef{Kind: KindQEMU, Node: "pve", VMID: 100},
		Status: 500, Message: "VM is locked (backup)"}
	if got, want := e.Error(), "pve update-config qemu/100@pve: locked: VM is locked (backup)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	e = &Error{Class: ClassTransient, Op: OpStart, Err: io.EOF, Indeterminate: true, UPID: "UPID:x"}
	if s := e.Error(); !strings.Contains(s, "EOF") || !strings.Contains(s, "outcome unknown") || !strings.Contains(s, "UPID:x") {
		t.Errorf("Error() = %q", s)
	}
	for _, c := range []Class{ClassUnknown, ClassTransient, ClassLocked, ClassConflict} {
		if !c.Retryable() {
			t.Errorf("%v should be retryable", c)
		}
	}
	for _, c := range []Class{ClassAlreadyDone, ClassGone, ClassTerminal, ClassUnauthorized} {
		if c.Retryable() {
			t.Errorf("%v should not be retryable", c)
		}
	}
	if Class(42).String() != "class(42)" {
		t.Errorf("String of bad class = %q", Class(42).String())
	}
}

func TestParseGoProxmoxError(t *testing.T) {
	for _, tc := range []struct {
		in     string
		status int
		msg    string
		ok     bool
	}{
		{"500 VM 100 already running", 500, "VM 100 already running", true},
		{"bad request: 400 Parameter verification failed. - {}", 400, "Parameter verification failed. - {}", true},
		{"501 Method 'GET /x' not implemented", 501, "Method 'GET /x' not implemented", true},
		{"5000 things", 0, "", false},
		{"EOF", 0, "", false},
		{"", 0, "", false},
	} {
		s, m, ok := parseGoProxmoxError(tc.in)
		if s != tc.status || m != tc.msg || ok != tc.ok {
			t.Errorf("parseGoProxmoxError(%q) = %d, %q, %v", tc.in, s, m, ok)
		}
	}
}

// TestClassifyPlainGoProxmox drives go-proxmox without our transport, so
// Classify sees exactly the errors go-proxmox itself builds.
func TestClassifyPlainGoProxmox(t *testing.T) {
	f := newFake(t)
	f.onError("POST", "/nodes/pve/qemu/100/status/start", 500, "VM 100 already running")
	f.on("PUT", "/nodes/pve/qemu/100/config", func(w http.ResponseWriter, _ *http.Request) {
		pveErrorBody(w, 400, "Parameter verification failed.", map[string]string{"cores": "type check ('integer') failed - got 'x'"})
	})
	f.onError("GET", "/cluster/resources", 401, "No ticket")
	pc := proxmox.NewClient(f.srv.URL+"/api2/json", proxmox.WithAPIToken("root@pam!x", "s"))
	for _, tc := range []struct {
		err  error
		want Class
		text string
	}{
		{pc.Post(bg, "/nodes/pve/qemu/100/status/start", nil, nil), ClassAlreadyDone, "500 VM 100 already running"},
		{pc.Put(bg, "/nodes/pve/qemu/100/config", map[string]string{"cores": "x"}, nil), ClassTerminal, "bad request: 400 Parameter verification failed."},
		{pc.Get(bg, "/cluster/resources", nil), ClassUnauthorized, "not authorized"},
		{pc.Get(bg, "/nope", nil), ClassTerminal, "501 Method 'GET /nope' not implemented"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.text) {
			t.Errorf("go-proxmox error = %v, want containing %q", tc.err, tc.text)
			continue
		}
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("Classify(%q) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
