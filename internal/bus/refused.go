package bus

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"

	"github.com/converge-pve/converge/internal/journal"
)

// NATS refuses a publish its user may not make with an asynchronous error
// on the connection and no answer at all: a JetStream publish (a request)
// or API call then only times out, and the caller reports a timeout
// instead of the refusal. apiDenials hears those errors and ends the
// waiting publishes to the refused subject at once with a PermissionError.

// PermissionError is a publish NATS refused for lack of permission.
type PermissionError struct {
	Subject string
	// User is the connection's NATS user, "" when it authenticates
	// otherwise (credentials file, nkey, token).
	User string
}

func (e *PermissionError) Error() string {
	who := "this connection's NATS user"
	if e.User != "" {
		who = fmt.Sprintf("NATS user %q", e.User)
	}
	return fmt.Sprintf("%s may not publish to %s: its role lacks that permission (docs/operations.md lists each role's)", who, e.Subject)
}

// Unwrap makes it a journal.ErrNotPermitted.
func (e *PermissionError) Unwrap() error { return journal.ErrNotPermitted }

// IsPermission reports a publish NATS refused for lack of permission.
func IsPermission(err error) bool {
	var pe *PermissionError
	return errors.As(err, &pe)
}

// violationRe finds the subject in nats-server's permissions violation:
// `Permissions Violation for Publish to "pve.desired.pve.101"`.
var violationRe = regexp.MustCompile(`(?i)publish to "([^"]+)"`)

// apiDenials records permission violations: the newest on JetStream's API
// (Provision explains with it), and refusals of publishes under way.
type apiDenials struct {
	user string
	msg  atomic.Pointer[string]

	mu      sync.Mutex
	waiting map[string]map[*waiter]struct{} // by subject
}

type waiter struct{ cancel context.CancelCauseFunc }

func (d *apiDenials) note(err error) {
	if !errors.Is(err, nats.ErrPermissionViolation) {
		return
	}
	if strings.Contains(err.Error(), "$JS.API.") {
		m := err.Error()
		d.msg.Store(&m)
	}
	sm := violationRe.FindStringSubmatch(err.Error())
	if sm == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for w := range d.waiting[sm[1]] {
		w.cancel(&PermissionError{Subject: sm[1], User: d.user})
	}
}

func (d *apiDenials) clear() { d.msg.Store(nil) }

// last is the newest violation noted since clear, "" if none.
func (d *apiDenials) last() string {
	if m := d.msg.Load(); m != nil {
		return *m
	}
	return ""
}

// watch returns ctx ended at once with a PermissionError (its cause) if
// NATS refuses a publish to subject while it lasts; done ends the watch.
func (d *apiDenials) watch(ctx context.Context, subject string) (_ context.Context, done func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	w := &waiter{cancel: cancel}
	d.mu.Lock()
	if d.waiting == nil {
		d.waiting = map[string]map[*waiter]struct{}{}
	}
	ws := d.waiting[subject]
	if ws == nil {
		ws = map[*waiter]struct{}{}
		d.waiting[subject] = ws
	}
	ws[w] = struct{}{}
	d.mu.Unlock()
	return ctx, func() {
		d.mu.Lock()
		// A subject's set goes only when empty: w is in the current one.
		delete(d.waiting[subject], w)
		if len(d.waiting[subject]) == 0 {
			delete(d.waiting, subject)
		}
		d.mu.Unlock()
		cancel(nil)
	}
}

// refused is the PermissionError that ended ctx (from watch), or err.
func refused(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	var pe *PermissionError
	if errors.As(context.Cause(ctx), &pe) {
		return pe
	}
	return err
}
