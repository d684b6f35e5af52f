package console_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/console"
)

// rawFake serves the console and a /v1 whose answers are raw JSON the
// test controls: for the stream's edge cases (refused, ended, hidden
// tabs) and guests shaped as a test needs them.
type rawFake struct {
	mu       sync.Mutex
	guests   []map[string]any
	timeline []map[string]any
	streams  atomic.Int32 // stream requests seen
	open     atomic.Int32 // streams open now
	// refuse, when set, answers stream request n with its status and
	// JSON error instead of a stream (0: a stream).
	refuse func(n int32) (int, string)
	// end ends every open stream (after a ping) when sent to.
	end chan struct{}
	// write answers POST /v1/{approve,pause,resume,release}; nil: 202.
	write func(w http.ResponseWriter, r *http.Request)
	// guest answers GET /v1/guests/{vmid}; nil: 404.
	guest   func(w http.ResponseWriter, r *http.Request)
	changes chan map[string]any
	srv     *httptest.Server
}

func newRaw(t *testing.T, guests ...map[string]any) *rawFake {
	f := &rawFake{guests: guests, end: make(chan struct{}), changes: make(chan map[string]any, 64)}
	mux := http.NewServeMux()
	ui := console.Handler()
	mux.Handle("GET /{$}", ui)
	mux.Handle("GET /assets/", ui)
	mux.HandleFunc("GET /v1/whoami", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]string{"name": "ops", "scope": "write", "cluster": "pve"})
	})
	mux.HandleFunc("GET /v1/guests/{vmid}/timeline", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		writeJSON(w, 200, map[string]any{"entries": f.timeline, "next_before": 0})
	})
	mux.HandleFunc("GET /v1/guests/{vmid}", func(w http.ResponseWriter, r *http.Request) {
		if f.guest != nil {
			f.guest(w, r)
			return
		}
		writeJSON(w, 404, map[string]string{"error": "no view"})
	})
	mux.HandleFunc("GET /v1/stream", func(w http.ResponseWriter, r *http.Request) {
		n := f.streams.Add(1)
		if f.refuse != nil {
			if code, msg := f.refuse(n); code != 0 {
				writeJSON(w, code, map[string]string{"error": msg})
				return
			}
		}
		f.open.Add(1)
		defer f.open.Add(-1)
		w.Header().Set("Content-Type", "application/x-ndjson")
		enc := json.NewEncoder(w)
		_ = enc.Encode(map[string]string{"type": "hello", "cluster": "pve", "who": "ops", "scope": "write"})
		f.mu.Lock()
		gs := append([]map[string]any(nil), f.guests...)
		f.mu.Unlock()
		for _, g := range gs {
			_ = enc.Encode(map[string]any{"type": "guest", "guest": g})
		}
		_ = enc.Encode(map[string]string{"type": "synced"})
		w.(http.Flusher).Flush()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-f.end:
				_ = enc.Encode(map[string]string{"type": "ping"})
				return
			case g := <-f.changes:
				_ = enc.Encode(map[string]any{"type": "guest", "guest": g})
				w.(http.Flusher).Flush()
			}
		}
	})
	for _, c := range []string{"approve", "pause", "resume", "release"} {
		mux.HandleFunc("POST /v1/"+c, func(w http.ResponseWriter, r *http.Request) {
			if f.write != nil {
				f.write(w, r)
				return
			}
			writeJSON(w, 202, map[string]any{"seq": 7})
		})
	}
	f.srv = httptest.NewServer(mux)
	// Streams end with the test, whatever the browser keeps open.
	t.Cleanup(func() { f.srv.CloseClientConnections(); f.srv.Close() })
	return f
}

// setGuests replaces what the next stream sends.
func (f *rawFake) setGuests(gs ...map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.guests = gs
}

// waitFor waits until cond holds on the test's side (a server counter),
// polling, up to 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("never %s", what)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, not timing
	}
}

// rawGuest is a summary as /v1 sends it: state, desired and observed
// config, the planner's drift.
func rawGuest(vmid int, state string, desired, config map[string]any, drift []string) map[string]any {
	return map[string]any{"vmid": vmid, "cluster": "pve", "state": state, "drift": drift, "desired": desired,
		"observed":   map[string]any{"exists": true, "node": "pve1", "kind": "qemu", "status": "running", "config": config, "read_at": "2026-01-01T00:00:00Z"},
		"updated_at": "2026-01-01T00:00:00Z"}
}
