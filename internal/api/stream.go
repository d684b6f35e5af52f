package api

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	json "github.com/go-json-experiment/json/v1"

	"github.com/converge-pve/converge/internal/views"
)

const (
	defaultMaxStreams = 64
	defaultPingEvery  = 15 * time.Second
	// defaultStreamAge ends a stream after this long (the console
	// reconnects at once): a client that never reads, which pings too
	// small to fill a socket buffer would never expose, cannot keep its
	// slot for longer.
	defaultStreamAge = 10 * time.Minute
	// streamWriteTimeout bounds writing one line of a stream: the
	// server's WriteTimeout would cut every stream, none would drop a
	// reader that stopped reading.
	streamWriteTimeout = 30 * time.Second
	// streamEndGrace is what an ended stream has left to write.
	streamEndGrace = time.Second
)

// liveStreams counts the open streams, in all and per caller, and ends
// them all at shutdown (http.Server.Shutdown waits for active
// connections, which a stream never leaves by itself).
type liveStreams struct {
	mu    sync.Mutex
	open  int
	by    map[string]int
	ended bool
	done  chan struct{}
}

// enter takes a stream's slot for caller; ok is false when limit are open,
// when caller holds a quarter of them already (one token cannot lock
// every operator out), or when the server is shutting down. done is
// closed at shutdown.
func (l *liveStreams) enter(limit int, caller string) (done <-chan struct{}, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done == nil {
		l.done = make(chan struct{})
	}
	if l.by == nil {
		l.by = map[string]int{}
	}
	if l.ended || l.open >= limit || l.by[caller] >= max(1, limit/4) {
		return nil, false
	}
	l.open++
	l.by[caller]++
	return l.done, true
}

func (l *liveStreams) leave(caller string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if l.by[caller]--; l.by[caller] <= 0 {
		delete(l.by, caller)
	}
}

// EndStreams ends every open GET /v1/stream and refuses new ones: give it
// to http.Server.RegisterOnShutdown, so that Shutdown does not wait for
// streams that never end by themselves.
func (s *Server) EndStreams() {
	l := &s.live
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done == nil {
		l.done = make(chan struct{})
	}
	if !l.ended {
		l.ended = true
		close(l.done)
	}
}

// streamLine is one line of GET /v1/stream.
type streamLine struct {
	Type    string         `json:"type"` // hello, guest, synced, ping
	Cluster string         `json:"cluster,omitempty"`
	Who     string         `json:"who,omitempty"`
	Scope   Scope          `json:"scope,omitempty"`
	Guest   *views.Summary `json:"guest,omitempty"`
}

// stream is GET /v1/stream: the guests' summaries as the views hold them,
// then every change, as newline-delimited JSON flushed line by line (a
// browser reads it with fetch(): EventSource cannot send a bearer token).
func (s *Server) stream(w http.ResponseWriter, r *http.Request, who caller) {
	if r.Method == http.MethodHead { // its answer is discarded: a slot held by nobody reading
		w.Header().Set("Allow", "GET")
		problem(w, http.StatusMethodNotAllowed, "GET only", nil)
		return
	}
	name := s.publisher(who)
	done, ok := s.live.enter(cmp.Or(s.MaxStreams, defaultMaxStreams), name)
	if !ok {
		problem(w, http.StatusServiceUnavailable, "too many open streams on this server or for this token (or it is shutting down); try again later", nil)
		return
	}
	defer s.live.leave(name)
	ctx, cancel := context.WithTimeout(r.Context(), cmp.Or(s.MaxStreamAge, defaultStreamAge))
	rc := http.NewResponseController(w)
	// Ending it cuts a write in progress too (shutdown, or the stream's
	// age), within streamEndGrace, which leaves a reader time for the
	// stream's clean end: one that does not read would otherwise hold the
	// handler for its write deadline. stopped, under mu, keeps a later
	// line from setting a deadline again.
	var mu sync.Mutex
	stopped := false
	cut := make(chan struct{})
	// The connection may serve another request once this returns: its
	// deadline is not to be touched then.
	defer func() { cancel(); <-cut }()
	go func() {
		defer close(cut)
		select {
		case <-done:
			cancel()
		case <-ctx.Done():
		}
		mu.Lock()
		stopped = true
		_ = rc.SetWriteDeadline(time.Now().Add(streamEndGrace))
		mu.Unlock()
	}()
	docs, err := s.Views.Follow(ctx)
	if err != nil {
		problem(w, http.StatusServiceUnavailable, "reading views: "+err.Error(), nil)
		return
	}
	// The stream outlives the server's WriteTimeout: each line has its own
	// deadline instead.
	if err := rc.SetWriteDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/x-ndjson")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	var buf bytes.Buffer
	send := func(l streamLine) bool {
		buf.Reset()
		if err := json.NewEncoder(&buf).Encode(l); err != nil { // one line: no indent
			s.Logger.Error().Err(err).Str("type", l.Type).Msg("stream: encoding a line")
			return false
		}
		mu.Lock()
		if stopped {
			mu.Unlock()
			return false
		}
		err := rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		mu.Unlock()
		if err != nil && !errors.Is(err, http.ErrNotSupported) {
			return false
		}
		if _, err := w.Write(buf.Bytes()); err != nil {
			return false // the reader is gone, or stopped reading
		}
		return rc.Flush() == nil
	}
	if !send(streamLine{Type: "hello", Cluster: s.Cluster, Who: s.publisher(who), Scope: who.scope}) {
		return
	}
	ping := time.NewTicker(cmp.Or(s.PingEvery, defaultPingEvery))
	defer ping.Stop()
	for {
		var l streamLine
		select {
		case <-ctx.Done():
			return
		case <-ping.C:
			l.Type = "ping"
		case d, ok := <-docs:
			if !ok {
				return // the views' watch ended (the bucket went away): the client reconnects
			}
			if d == nil {
				l.Type = "synced"
			} else {
				sum := views.Summarise(d)
				l.Type, l.Guest = "guest", &sum
			}
		}
		if !send(l) {
			return
		}
	}
}
