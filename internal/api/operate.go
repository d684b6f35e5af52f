package api

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/control"
)

// release is DELETE /v1/desired/{vmid}: the guest is handed back. The
// journal records who released it; converge leaves it alone until a new
// desired state arrives.
func (s *Server) release(w http.ResponseWriter, r *http.Request, who caller) {
	vmid, ok := vmidParam(w, r)
	if !ok {
		return
	}
	s.operate(w, r, events.Control{Meta: events.NewMeta(s.publisher(who), r.Header.Get("X-Correlation-Id"), time.Now()),
		Command: events.CommandRelease, VMIDs: []int{vmid}})
}

// operateBody is the body of POST /v1/approve, pause, resume and release.
type operateBody struct {
	VMIDs  []int  `json:"vmids"`
	All    bool   `json:"all"`
	Reason string `json:"reason"`
}

// operator is POST /v1/<command>: an operator's request for the guests
// named (or all), journalled with who asked and why, validated exactly as
// the CLI's (events.Control.Validate: release refuses all).
func (s *Server) operator(command string) func(w http.ResponseWriter, r *http.Request, who caller) {
	return func(w http.ResponseWriter, r *http.Request, who caller) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			problem(w, http.StatusRequestEntityTooLarge, "body too large or unreadable: "+err.Error()+"; nothing was published", nil)
			return
		}
		// Strict: one object, exact names, no unknown or duplicate
		// members, and invalid UTF-8 refused rather than replaced.
		b, err := events.DecodeStrict[operateBody](body)
		if err != nil {
			problem(w, http.StatusBadRequest, `want one object {"vmids": [101, …]} or {"all": true}, and optionally "reason": `+err.Error()+"; nothing was published", nil)
			return
		}
		s.operate(w, r, events.Control{Meta: events.NewMeta(s.publisher(who), r.Header.Get("X-Correlation-Id"), time.Now()),
			Command: command, VMIDs: b.VMIDs, All: b.All, Reason: b.Reason})
	}
}

func (s *Server) operate(w http.ResponseWriter, r *http.Request, c events.Control) {
	if err := c.Validate(); err != nil {
		problem(w, http.StatusBadRequest, err.Error()+"; nothing was published", nil)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	seq, err := control.Publish(ctx, s.Journal, s.Cluster, c)
	if err != nil {
		publishFailed(w, "publish "+c.Command, err)
		return
	}
	s.Logger.Info().Str("command", c.Command).Ints("vmids", c.VMIDs).Bool("all", c.All).Uint64("seq", seq).
		Str("by", c.Publisher).Str("reason", c.Reason).Msg("operator request accepted over HTTP")
	writeJSON(w, http.StatusAccepted, map[string]any{"command": c.Command, "vmids": c.VMIDs, "all": c.All, "cluster": s.Cluster,
		"seq": seq, "by": c.Publisher, "reason": c.Reason})
}
