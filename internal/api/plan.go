package api

import (
	"io"
	"mime"
	"net/http"
	"time"

	"github.com/converge-pve/converge/internal/planfile"
)

// postPlan is POST /v1/plan: the body is a file of desired states as
// `converge desire -f` reads it (JSON: one desired state, a list, or
// {"guests": [...]}), the answer what `converge plan -f` prints with -o
// json. It publishes nothing, so a read token may call it; the body must
// still be application/json (a form in the operator's browser cannot make
// the server plan). Entries the desired contract refuses are in the
// answer (desired "rejected", with the problems), not a 400: the rest is
// planned.
func (s *Server) postPlan(w http.ResponseWriter, r *http.Request, _ caller) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		problem(w, http.StatusUnsupportedMediaType, "the body must be application/json", nil)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		problem(w, http.StatusRequestEntityTooLarge, "body too large or unreadable: "+err.Error(), nil)
		return
	}
	entries, err := planfile.Split(body)
	if err != nil {
		problem(w, http.StatusBadRequest, "want a desired state, a list of them, or {\"guests\": [...]}: "+err.Error(), nil)
		return
	}
	res, err := planfile.FromViews(r.Context(), s.Views, planfile.Input{Cluster: s.Cluster, Entries: entries, Now: time.Now()})
	if err != nil {
		// No planner's views yet, or unreadable: only time helps.
		problem(w, http.StatusServiceUnavailable, err.Error(), nil)
		return
	}
	writeJSON(w, http.StatusOK, res)
}
