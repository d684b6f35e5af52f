package bus

import (
	"errors"
	"strings"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"
)

// writeHealth remembers whether the newest write through a connection was
// refused for want of storage. A full JetStream (its store limit, or an
// account's) still answers a fenced probe with "wrong last sequence", as
// it checks the fence before the storage: only real writes show it.
type writeHealth struct {
	// full is the newest write's refusal for storage, nil once one is
	// stored. Read on every write: atomic, and left alone when already nil.
	full atomic.Pointer[error]
}

// note records a write's outcome.
func (w *writeHealth) note(err error) {
	switch {
	case w == nil:
	case err == nil:
		if w.full.Load() != nil {
			w.full.Store(nil)
		}
	case storageRefusal(err): // other failures (fences, timeouts) say nothing of storage
		w.full.Store(&err)
	}
}

// storageRefusal reports whether JetStream refused a write for want of
// storage: insufficient resources, a storage or memory limit exceeded, a
// stream's maximum bytes or messages with discard new.
func storageRefusal(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	switch apiErr.ErrorCode {
	// nats-server's JSInsufficientResourcesErr, JSStorageResourcesExceededErr,
	// JSMemoryResourcesExceededErr (nats.go names none of them).
	case 10023, 10047, 10028:
		return true
	}
	d := strings.ToLower(apiErr.Description)
	return strings.Contains(d, "maximum bytes exceeded") || strings.Contains(d, "maximum messages exceeded")
}

// WriteRefused is the newest write's refusal for want of storage, nil when
// the newest write (or every one so far) was stored: the journal is full.
func (b *Bus) WriteRefused() error {
	if b.writes == nil {
		return nil
	}
	if p := b.writes.full.Load(); p != nil {
		return *p
	}
	return nil
}
