package pve

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	proxmox "github.com/luthermonson/go-proxmox"
)

// Op names the operation an error came from. Some texts mean different things
// for different operations ("not running" is already-done for a stop, a
// violated precondition for a reboot), so classification takes it into
// account.
type Op string

const (
	OpUnknown      Op = ""
	OpLogin        Op = "login"
	OpInventory    Op = "inventory"
	OpReadConfig   Op = "read-config"
	OpReadPending  Op = "read-pending"
	OpReadStatus   Op = "read-status"
	OpVerifyPower  Op = "verify-power"
	OpStart        Op = "start"
	OpStop         Op = "stop"
	OpShutdown     Op = "shutdown"
	OpReboot       Op = "reboot"
	OpUpdateConfig Op = "update-config"
	OpClone        Op = "clone"
	OpDelete       Op = "delete"
	OpTaskStatus   Op = "task-status"
	OpTaskLog      Op = "task-log"
	OpTaskList     Op = "task-list"
	OpReadHA       Op = "read-ha"   // HAResources
	OpRemoveHA     Op = "remove-ha" // RemoveHA: "not HA managed" is already done
)

// Error is the error type returned by every Client method that talks to
// Proxmox (context cancellation of WaitTask excepted, see there).
type Error struct {
	Class Class
	Op    Op
	Ref   GuestRef // zero for calls not about one guest
	// Status is the HTTP status code, 0 when there was no HTTP answer
	// (network error) or the failure is a task's exit status.
	Status int
	// Message is Proxmox's message: the HTTP reason phrase / body message,
	// or the task's exit status.
	Message string
	// UPID is set when the failure is a task's exit status.
	UPID string
	// Indeterminate is set when a mutation's request may have reached
	// Proxmox and taken effect although no answer came back (timeout,
	// connection reset, 502/504 from a proxy). Do not blindly re-issue the
	// mutation: re-observe first.
	Indeterminate bool
	// Err is the underlying error, if any.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("pve")
	if e.Op != OpUnknown {
		b.WriteString(" ")
		b.WriteString(string(e.Op))
	}
	if !e.Ref.IsZero() {
		b.WriteString(" ")
		b.WriteString(e.Ref.String())
	}
	b.WriteString(": ")
	b.WriteString(e.Class.String())
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	} else if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	if e.UPID != "" {
		b.WriteString(" (task ")
		b.WriteString(e.UPID)
		b.WriteString(")")
	}
	if e.Indeterminate {
		b.WriteString(" (outcome unknown)")
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrLocked) etc. work for the error's class.
func (e *Error) Is(target error) bool { return target == e.Class.Sentinel() }

// Classify returns the class of any error a Proxmox call can produce: an
// *Error (its class), go-proxmox errors ("500 VM 100 already running",
// "bad request: 400 …", ErrNotAuthorized, ErrTimeout), TLS and network
// errors, context errors. Classify(nil) is ClassUnknown; check for nil first.
func Classify(err error) Class {
	return classify(OpUnknown, err)
}

// guestMissingRE matches "VM 100 does not exist" style texts (lower-cased).
var guestMissingRE = regexp.MustCompile(`\b(vm|ct) \d+ (does not exist|not found)`)

// ClassifyOpMessage classifies an HTTP status and message for an operation.
func ClassifyOpMessage(op Op, status int, msg string) Class {
	m := strings.ToLower(strings.TrimSpace(msg))
	// Order matters: more specific texts first ("can't lock file" before
	// "is locked", the guest's config file before any other "does not
	// exist").
	switch {
	case op == OpDeleteSnapshot && strings.HasPrefix(m, "snapshot '") && strings.HasSuffix(m, "' does not exist"),
		op == OpCreatePool && strings.Contains(m, "already exists"):
		// Nothing left to delete; the pool is there (these texts would
		// otherwise read as a missing dependency and a conflict).
		return ClassAlreadyDone
	case strings.Contains(m, "permission check failed (pool '") && strings.Contains(m, "does not exist"):
		// check_pool_exist raises a permission exception (403) for a
		// missing pool: the request names something that is not there,
		// the credentials are fine.
		return ClassTerminal
	case status == 401 || status == 403,
		strings.Contains(m, "permission check failed"),
		strings.Contains(m, "authentication failure"),
		strings.Contains(m, "invalid token value"),
		strings.Contains(m, "no ticket"):
		return ClassUnauthorized
	case strings.Contains(m, "checksum mismatch"),
		strings.Contains(m, "detected modified configuration"),
		strings.Contains(m, "file changed by other user"):
		return ClassConflict
	case strings.Contains(m, "can't lock file"),
		strings.Contains(m, "cfs-lock"),
		strings.Contains(m, "cfs lock"),
		strings.Contains(m, "is locked"):
		// The config file's flock or a cluster filesystem lock held by
		// another task, or a config lock (backup, migrate, snapshot,
		// clone): wait for it to go, never a failure.
		return ClassLocked
	case op == OpReboot && strings.Contains(m, "powerdown failed"):
		// A VM that ignored the reboot's ACPI request runs on: Proxmox
		// never forces a reboot, and asking again changes nothing.
		return ClassTerminal
	case strings.Contains(m, "got timeout"),
		strings.Contains(m, "timeout waiting"),
		strings.Contains(m, "container did not stop"),
		strings.Contains(m, "interrupted by signal"),
		strings.Contains(m, "received interrupt"):
		return ClassTransient
	case strings.Contains(m, "already running"):
		if op == OpStart || op == OpUnknown {
			return ClassAlreadyDone
		}
		return ClassTerminal
	case strings.Contains(m, "not running"):
		if op == OpStop || op == OpShutdown {
			return ClassAlreadyDone
		}
		return ClassTerminal
	case strings.Contains(m, "already exists"):
		return ClassConflict
	case op == OpRemoveHA && strings.Contains(m, "not ha managed"):
		// "cannot delete service 'vm:100', not HA managed!": nothing to remove.
		return ClassAlreadyDone
	case strings.Contains(m, "no such task"):
		return ClassGone
	case strings.Contains(m, "configuration file") && strings.Contains(m, "does not exist"),
		strings.Contains(m, "unable to find configuration file"),
		strings.Contains(m, "no such vm"),
		strings.Contains(m, "no such ct"),
		guestMissingRE.MatchString(m):
		return ClassGone
	case strings.Contains(m, "does not exist"), strings.Contains(m, "no such storage"):
		// Something the request depends on (storage, bridge, volume) is
		// missing, not the guest: a spec or environment error.
		return ClassTerminal
	case strings.Contains(m, "is running - destroy failed"),
		strings.Contains(m, "container is running"),
		strings.Contains(m, "is paused - cannot"),
		strings.Contains(m, "hostname lookup"),
		strings.Contains(m, "no such cluster node"),
		// destroy_vm's refusals: a protected guest, an HA-managed one
		// without purge
		strings.Contains(m, "protection mode enabled"),
		strings.Contains(m, "used in ha resources"),
		// clone_vm's refusals: the clone as asked cannot be made
		strings.Contains(m, "not allowed for linked clones"),
		strings.Contains(m, "clone feature"),
		strings.Contains(m, "can't clone"),
		strings.Contains(m, "only possible from a snapshot"):
		return ClassTerminal
	case strings.Contains(m, "connection refused"),
		strings.Contains(m, "connection reset"),
		strings.Contains(m, "connection timed out"),
		strings.Contains(m, "no route to host"),
		strings.Contains(m, "broken pipe"),
		strings.Contains(m, "i/o timeout"),
		strings.Contains(m, "seems to be offline"),
		strings.Contains(m, "cluster not ready"):
		return ClassTransient
	}
	if c, ok := classifyOpsMessage(op, m); ok {
		return c
	}
	switch {
	case status == 400 || status == 501:
		return ClassTerminal
	case status == 502 || status == 503 || status == 504 || status == 595 || status == 596 || status == 598 || status == 599:
		return ClassTransient
	case status >= 400 && status < 500:
		return ClassTerminal
	}
	return ClassUnknown
}

// classify is Classify with the operation known.
func classify(op Op, err error) Class {
	if err == nil {
		return ClassUnknown
	}
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Class
	}
	var se *statusError
	if errors.As(err, &se) {
		return ClassifyOpMessage(op, se.Code, se.Message())
	}
	// Answers are decoded from their whole body, read before: a truncated
	// one (io.ErrUnexpectedEOF inside) is malformed, not a network fault.
	var syn *jsontext.SyntacticError
	var sem *json.SemanticError
	if errors.As(err, &syn) || errors.As(err, &sem) {
		return ClassUnknown // a malformed answer: not ours to guess
	}
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return ClassTransient
	case errors.Is(err, proxmox.ErrNotAuthorized):
		return ClassUnauthorized
	case errors.Is(err, proxmox.ErrTimeout):
		return ClassTransient
	case isTrustError(err):
		return ClassUnauthorized
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ETIMEDOUT),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return ClassTransient
	}
	if status, msg, ok := parseGoProxmoxError(err.Error()); ok {
		return ClassifyOpMessage(op, status, msg)
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return ClassTransient
	}
	return ClassifyOpMessage(op, 0, err.Error())
}

// isTrustError reports TLS verification failures, including our pin check.
// IsTrustError reports whether err is Proxmox's certificate not being
// trusted (unknown authority, wrong host name, invalid, or not the pinned
// fingerprint).
func IsTrustError(err error) bool { return isTrustError(err) }

func isTrustError(err error) bool {
	var (
		cv   *tls.CertificateVerificationError
		ua   x509.UnknownAuthorityError
		hn   x509.HostnameError
		ci   x509.CertificateInvalidError
		fpme *fingerprintMismatchError
	)
	return errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &hn) ||
		errors.As(err, &ci) || errors.As(err, &fpme)
}

// parseGoProxmoxError splits go-proxmox's error texts: "500 <reason>" for
// 500/501 (go-proxmox only keeps res.Status) and "bad request: 400 <reason> -
// <errors json>" for 400.
func parseGoProxmoxError(s string) (status int, msg string, ok bool) {
	s = strings.TrimPrefix(s, "bad request: ")
	if len(s) < 3 {
		return 0, "", false
	}
	code, err := strconv.Atoi(s[:3])
	if err != nil || code < 100 || code > 999 {
		return 0, "", false
	}
	if len(s) > 3 && s[3] != ' ' {
		return 0, "", false
	}
	return code, strings.TrimSpace(s[3:]), true
}

// statusError is produced by our transport for every non-2xx answer, so the
// status code, PVE's reason phrase and the body's message and parameter
// errors survive (go-proxmox keeps only res.Status for 500s, and decodes the
// body of e.g. a 595 as if it were a success).
type statusError struct {
	Code   int
	Reason string            // reason phrase of the status line
	Body   string            // body "message", if any
	Params map[string]string // body "errors" (400 parameter errors)
}

func (e *statusError) Message() string {
	msg := e.Reason
	if msg == "" || strings.EqualFold(msg, httpStatusText(e.Code)) {
		// A proxy or a canonical reason phrase: the body may say more.
		if b := strings.TrimSpace(e.Body); b != "" {
			msg = b
		}
	}
	if msg == "" {
		msg = httpStatusText(e.Code)
	}
	if len(e.Params) > 0 {
		keys := make([]string, 0, len(e.Params))
		for k := range e.Params {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, k+": "+strings.TrimSpace(e.Params[k]))
		}
		msg += " (" + strings.Join(parts, "; ") + ")"
	}
	return msg
}

func (e *statusError) Error() string {
	return fmt.Sprintf("%d %s", e.Code, e.Message())
}

// wrapError turns any error from a call into an *Error, classified for op.
// mutation marks calls that may change Proxmox state, for Indeterminate.
func wrapError(op Op, ref GuestRef, mutation bool, err error) error {
	if err == nil {
		return nil
	}
	var pe *Error
	if errors.As(err, &pe) {
		return err
	}
	e := &Error{Class: classify(op, err), Op: op, Ref: ref, Err: err}
	var se *statusError
	switch {
	case errors.As(err, &se):
		e.Status = se.Code
		e.Message = se.Message()
		// A gateway error means a proxy answered; PVE may have run the call.
		e.Indeterminate = mutation && (se.Code == 502 || se.Code == 504 || se.Code == 596)
	case errors.Is(err, proxmox.ErrNotAuthorized):
		e.Status = 401
		e.Message = err.Error()
	default:
		if status, msg, ok := parseGoProxmoxError(err.Error()); ok {
			e.Status, e.Message = status, msg
		}
		e.Indeterminate = mutation && e.Class == ClassTransient && !notSent(err)
	}
	return e
}

// notSent reports errors that prove the request never reached the server:
// dial and DNS failures, TLS trust failures.
func notSent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return true
	}
	return isTrustError(err) || errors.Is(err, syscall.ECONNREFUSED)
}
