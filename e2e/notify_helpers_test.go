package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// hookReceiver is the test's webhook: every request's key, counted.
type hookReceiver struct {
	mu    sync.Mutex
	count map[string]int
	order []string
	// holdFor are keys whose first copy the receiver takes and then
	// holds, unanswered, until release is closed; held says which.
	holdFor map[string]bool
	held    chan string
	release chan struct{}
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var n struct{ Key string }
	_ = json.Unmarshal(b, &n)
	k := r.Header.Get("X-Converge-Key")
	if k == "" || k != n.Key || r.Header.Get("Idempotency-Key") != k {
		// A copy without its key, or with another: the receiver could not
		// deduplicate it.
		w.WriteHeader(http.StatusBadRequest)
		h.mu.Lock()
		h.count["BAD:"+k+"|"+n.Key]++
		h.mu.Unlock()
		return
	}
	h.mu.Lock()
	h.count[k]++
	h.order = append(h.order, k)
	hold := h.holdFor[k] && h.count[k] == 1
	h.mu.Unlock()
	if hold {
		// Taken (a real receiver would have acted on it), not yet
		// answered: in flight.
		h.held <- k
		<-h.release
	}
	w.WriteHeader(http.StatusOK)
}

func (h *hookReceiver) has(keys ...string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, k := range keys {
		if h.count[k] == 0 {
			return false
		}
	}
	return true
}

// received is the first key received that is key or extends it by a
// further "/…" part, or "".
func (h *hookReceiver) received(key string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, k := range h.order {
		if k == key || strings.HasPrefix(k, key+"/") {
			return k
		}
	}
	return ""
}

// leaseOwners are the executor partition leases' owners, by key.
func leaseOwners(ctx context.Context, kv jetstream.KeyValue) map[string]string {
	out := map[string]string{}
	l, err := kv.ListKeysFiltered(ctx, "executor-pve.p.*")
	if err != nil {
		return out
	}
	defer func() { _ = l.Stop() }()
	for k := range l.Keys() {
		if e, err := kv.Get(ctx, k); err == nil {
			out[k] = string(e.Value())
		}
	}
	return out
}

func waitBucket(t *testing.T, ctx context.Context, js jetstream.JetStream, name string) jetstream.KeyValue {
	t.Helper()
	var kv jetstream.KeyValue
	eventually(t, 30*time.Second, "bucket "+name, func() bool {
		var err error
		kv, err = js.KeyValue(ctx, name)
		return err == nil
	})
	return kv
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
