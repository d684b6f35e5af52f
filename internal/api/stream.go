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
	// streamWriteTimeout bounds writing one line of a stream: the
	// server's WriteTimeout would cut every stream, none would drop a
	// reader that stopped reading.
	streamWriteTimeout = 30 * time.Second
)

// liveStreams counts the open streams and ends them all at shutdown
// (http.Server.Shutdown waits for active connections, which a stream
// never leaves by itself).
type liveStreams struct {
	mu    sync.Mutex
	open  int
	ended bool
	done  chan struct{}
}

// enter takes a stream's slot; ok is false when max are open or the
// server is shutting down. done is closed at shutdown.
func (l *liveStreams) enter(max int) (done <-chan struct{}, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done == nil {
		l.done = make(chan struct{})
	}
	if l.ended || l.open >= max {
		return nil, false
	}
	l.open++
	return l.done, true
}

func (l *liveStreams) leave() {
	l.mu.Lock()
	l.open--
	l.mu.Unlock()
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
	done, ok := s.live.enter(cmp.Or(s.MaxStreams, defaultMaxStreams))
	if !ok {
		problem(w, http.StatusServiceUnavailable, "too many open streams on this server (or it is shutting down); try again later", nil)
		return
	}
	defer s.live.leave()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() { // shutdown ends the stream
		select {
		case <-done:
			cancel()
		case <-ctx.Done():
		}
	}()
	docs, err := s.Views.Follow(ctx)
	if err != nil {
		problem(w, http.StatusServiceUnavailable, "reading views: "+err.Error(), nil)
		return
	}
	rc := http.NewResponseController(w)
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
		if err := rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
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
