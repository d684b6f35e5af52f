package events

// ErrorClass is what a failed action's error means for what comes next
// (Result.ErrorClass). The Proxmox adapter classifies every failure once,
// into one of these; everything downstream (the fold, Plan, status) switches
// on the class and never reads error texts.
type ErrorClass string

// Error classes.
const (
	// ClassUnknown is an unrecognised failure: retried with backoff.
	ClassUnknown ErrorClass = "unknown"
	// ClassTransient will likely succeed later: network errors, timeouts,
	// 5xx, flock contention.
	ClassTransient ErrorClass = "transient"
	// ClassLocked: the guest carries a Proxmox lock; wait for it to go.
	ClassLocked ErrorClass = "locked"
	// ClassAlreadyDone: the guest already was as the action would leave it.
	ClassAlreadyDone ErrorClass = "already-done"
	// ClassGone: the guest or task does not exist on the addressed node.
	ClassGone ErrorClass = "gone"
	// ClassTerminal fails again unchanged (parameter errors, violated
	// preconditions): not retried until the desired state changes.
	ClassTerminal ErrorClass = "terminal"
	// ClassConflict: Proxmox's state changed under the request (config
	// digest mismatch): re-plan from the fresh read at once.
	ClassConflict ErrorClass = "conflict"
	// ClassUnauthorized: credentials rejected or certificate untrusted;
	// retrying cannot help until the configuration is fixed.
	ClassUnauthorized ErrorClass = "unauthorized"
)

// Terminal reports whether retrying the same request cannot succeed: only a
// new desired revision (or a fixed configuration) can.
func (c ErrorClass) Terminal() bool { return c == ClassTerminal || c == ClassUnauthorized }
