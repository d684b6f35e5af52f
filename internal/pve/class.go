package pve

import (
	"errors"
	"strconv"

	"github.com/converge-pve/converge/events"
)

// Class is what a caller should do about a failed Proxmox call. Errors are
// classified once, in this package; callers switch on the class (or use
// errors.Is with the sentinels) and never match message texts themselves.
type Class int

const (
	// ClassUnknown is an unrecognised failure: Proxmox answered 500 with a
	// message this package does not know, or a task failed with an unfamiliar
	// exit status. Treat it like ClassTransient (retry with backoff, bounded),
	// but surface the message: it may well be permanent.
	ClassUnknown Class = iota
	// ClassTransient will likely succeed if retried later: network errors,
	// timeouts, 502/503/504/595/596, flock contention ("can't lock file …
	// got timeout"), shutdown timeouts.
	ClassTransient
	// ClassLocked means the guest carries a Proxmox lock (backup, clone,
	// migrate, snapshot, …). Wait for the lock to go; it is not an error of
	// the action.
	ClassLocked
	// ClassAlreadyDone means the guest is already in the state the operation
	// would produce ("already running" on start, "not running" on
	// stop/shutdown). The action succeeded idempotently.
	ClassAlreadyDone
	// ClassGone means the guest (or task) does not exist on the addressed
	// node. It may have been deleted or migrated: re-read the inventory
	// before concluding anything.
	ClassGone
	// ClassTerminal will fail again unchanged: parameter errors (HTTP 400),
	// unsupported calls (501), violated preconditions (deleting a running
	// VM, shutting down a paused one, rebooting a stopped one). Do not retry
	// the same request; a new desired revision or observation may help.
	ClassTerminal
	// ClassConflict means Proxmox's state differs from what the request
	// assumed: config digest mismatch, or the target vmid already exists.
	// Re-read, re-plan, then act.
	ClassConflict
	// ClassUnauthorized means the credentials were rejected, lack a
	// permission, or the server's certificate could not be trusted. It
	// affects every call, not one guest; fix the configuration.
	ClassUnauthorized
)

// classNames are the classes as events carry them (events.ErrorClass).
var classNames = [...]events.ErrorClass{
	ClassUnknown:      events.ClassUnknown,
	ClassTransient:    events.ClassTransient,
	ClassLocked:       events.ClassLocked,
	ClassAlreadyDone:  events.ClassAlreadyDone,
	ClassGone:         events.ClassGone,
	ClassTerminal:     events.ClassTerminal,
	ClassConflict:     events.ClassConflict,
	ClassUnauthorized: events.ClassUnauthorized,
}

func (c Class) String() string {
	if c >= 0 && int(c) < len(classNames) {
		return string(classNames[c])
	}
	return "class(" + strconv.Itoa(int(c)) + ")"
}

// Event is the class as a result event records it (events.ErrorClass);
// out-of-range values are events.ClassUnknown.
func (c Class) Event() events.ErrorClass {
	if c >= 0 && int(c) < len(classNames) {
		return classNames[c]
	}
	return events.ClassUnknown
}

// Retryable reports whether repeating the call later (after backoff, and for
// ClassConflict after re-reading) can succeed without any other change.
func (c Class) Retryable() bool {
	switch c {
	case ClassUnknown, ClassTransient, ClassLocked, ClassConflict:
		return true
	}
	return false
}

// Sentinels, one per class, so callers can write errors.Is(err, pve.ErrGone).
// An *Error matches exactly the sentinel of its class.
var (
	ErrUnknown      = errors.New("pve: unclassified failure")
	ErrTransient    = errors.New("pve: transient failure")
	ErrLocked       = errors.New("pve: guest is locked")
	ErrAlreadyDone  = errors.New("pve: already in the requested state")
	ErrGone         = errors.New("pve: guest or task does not exist")
	ErrTerminal     = errors.New("pve: request cannot succeed as sent")
	ErrConflict     = errors.New("pve: state changed underneath the request")
	ErrUnauthorized = errors.New("pve: not authorized")
)

var classSentinels = [...]error{
	ClassUnknown:      ErrUnknown,
	ClassTransient:    ErrTransient,
	ClassLocked:       ErrLocked,
	ClassAlreadyDone:  ErrAlreadyDone,
	ClassGone:         ErrGone,
	ClassTerminal:     ErrTerminal,
	ClassConflict:     ErrConflict,
	ClassUnauthorized: ErrUnauthorized,
}

// Sentinel returns the sentinel error of the class.
func (c Class) Sentinel() error {
	if c >= 0 && int(c) < len(classSentinels) {
		return classSentinels[c]
	}
	return ErrUnknown
}
