package api

import (
	"context"
	"net/http"
	"strconv"
	"time"
)

// Timeline paging (GET /v1/guests/{vmid}/timeline?limit=N).
const (
	defaultTimelineLimit = 50
	maxTimelineLimit     = 500
)

// whoami is GET /v1/whoami: who the token is and what it may do, for a
// client (the console) to sign in with and to show only the actions its
// scope allows. The server still checks the scope on every call.
func (s *Server) whoami(w http.ResponseWriter, r *http.Request, who caller) {
	writeJSON(w, http.StatusOK, map[string]any{"name": s.publisher(who), "scope": who.scope, "cluster": s.Cluster})
}

// timeline is GET /v1/guests/{vmid}/timeline?before=SEQ&limit=N: the
// guest's history from the journal (as `converge history -o json`
// prints its entries), newest first, a page at a time.
func (s *Server) timeline(w http.ResponseWriter, r *http.Request, _ caller) {
	vmid, ok := vmidParam(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	var before uint64
	if raw := q.Get("before"); raw != "" {
		b, err := strconv.ParseUint(raw, 10, 64)
		if err != nil {
			problem(w, http.StatusBadRequest, "before must be a journal sequence (an unsigned integer; 0 or absent: from the newest)", nil)
			return
		}
		before = b
	}
	limit := defaultTimelineLimit
	if raw := q.Get("limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > maxTimelineLimit {
			problem(w, http.StatusBadRequest, "limit must be an integer within 1.."+strconv.Itoa(maxTimelineLimit), nil)
			return
		}
		limit = n
	}
	if s.Timeline == nil {
		problem(w, http.StatusServiceUnavailable, "this process does not read the journal's timelines", nil)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	entries, next, err := s.Timeline(ctx, vmid, before, limit)
	if err != nil {
		problem(w, http.StatusServiceUnavailable, "reading the journal: "+err.Error(), nil)
		return
	}
	if entries == nil {
		entries = []any{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"vmid": vmid, "cluster": s.Cluster, "entries": entries, "next_before": next})
}
