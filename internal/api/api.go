package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/console"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/views"
)

// Server holds what the handlers need.
type Server struct {
	Cluster string
	Views   views.Reader
	// Journal publishes desired state posted over HTTP.
	Journal  journal.Appender
	Gatherer prometheus.Gatherer
	// Checks, if set, are the readiness checks of this process, evaluated
	// at each /readyz request: it must be cheap (report what probes and
	// roles already found, never call out). Without it /readyz is ready.
	Checks func() []Check
	// VerifyPeriod, if set (a process running the observer), is reported
	// with the guests: how long drift /cluster/resources does not show
	// (pending values, description, onboot) may go unseen at the current
	// number of guests (docs/drift.md). 0: unknown yet.
	VerifyPeriod func() time.Duration
	// Guard decides who may call /v1 (tokens, hosts, origins).
	Guard Guard
	// Sign, if set, is applied to a desired message posted over HTTP
	// before it is journalled (a server-side signature).
	Sign func(m *events.Message) error
	// Timeline, if set, reads one guest's timeline from the journal
	// (internal/audit, wired by internal/app: this package links no NATS
	// client): newest first, at most limit entries older than before (0:
	// from the newest); nextBefore is the oldest entry's sequence when
	// older ones exist, else 0. Without it the timeline answers 503.
	Timeline func(ctx context.Context, vmid int, before uint64, limit int) (entries any, nextBefore uint64, err error)
	// MaxStreams bounds the open GET /v1/stream answers (0: 64), so that
	// streams cannot take every connection; PingEvery is how often a
	// stream says it is alive (0: 15 s).
	MaxStreams int
	PingEvery  time.Duration
	// MaxStreamAge ends a stream after this long (0: 10 minutes); the
	// console reconnects.
	MaxStreamAge time.Duration
	Logger       zerolog.Logger

	live liveStreams // stream.go
}

// Check is the outcome of one readiness check.
type Check struct {
	// Name says what was checked: "journal", "planner", "proxmox", …
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	// Reason says why the check fails (or, for a passing one, what it
	// last saw).
	Reason string `json:"reason,omitempty"`
}

// Readiness is the /readyz body.
type Readiness struct {
	Status string `json:"status"` // "ready" or "not ready"
	// Reason sums up the failing checks, "name: reason; …".
	Reason string  `json:"reason,omitempty"`
	Checks []Check `json:"checks"`
}

// Handler returns the HTTP routes.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.Gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.HandleFunc("GET /v1/guests", s.guarded(false, s.listGuests))
	mux.HandleFunc("GET /v1/guests/{vmid}", s.guarded(false, s.getGuest))
	mux.HandleFunc("POST /v1/desired/{vmid}", s.guarded(true, s.postDesired))
	mux.HandleFunc("DELETE /v1/desired/{vmid}", s.guarded(true, s.release))
	// Operators' requests (operate.go), journalled with who and why.
	for _, c := range []string{events.CommandApprove, events.CommandPause, events.CommandResume, events.CommandRelease} {
		mux.HandleFunc("POST /v1/"+c, s.guarded(true, s.operator(c)))
	}
	// The console's reads: who am I, a guest's timeline (timeline.go), live updates (stream.go).
	mux.HandleFunc("GET /v1/whoami", s.guarded(false, s.whoami))
	mux.HandleFunc("GET /v1/guests/{vmid}/timeline", s.guarded(false, s.timeline))
	mux.HandleFunc("GET /v1/stream", s.guarded(false, s.stream))
	// Plans, publishes nothing: read scope (plan.go).
	mux.HandleFunc("POST /v1/plan", s.guarded(false, s.postPlan))
	// The operator console: public pages, all data from /v1 (docs/console.md).
	ui := console.Handler()
	mux.Handle("GET /{$}", ui)
	mux.Handle("GET /assets/", ui)
	return mux
}

// readyz answers 200 when every check passes, otherwise 503; the body
// lists every check, and Reason the failing ones.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	out := Readiness{Status: "ready", Checks: []Check{}}
	if s.Checks != nil {
		out.Checks = append(out.Checks, s.Checks()...)
	}
	var failing []string
	for _, c := range out.Checks {
		if !c.OK {
			failing = append(failing, c.Name+": "+c.Reason)
		}
	}
	if len(failing) > 0 {
		out.Status, out.Reason = "not ready", strings.Join(failing, "; ")
		writeJSON(w, http.StatusServiceUnavailable, out)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) listGuests(w http.ResponseWriter, r *http.Request, _ caller) {
	docs, err := s.Views.List(r.Context())
	if err != nil {
		problem(w, http.StatusServiceUnavailable, "reading views: "+err.Error(), nil)
		return
	}
	out := make([]views.Summary, 0, len(docs))
	for i := range docs {
		out = append(out, views.Summarise(&docs[i]))
	}
	body := map[string]any{"cluster": s.Cluster, "guests": out}
	if s.VerifyPeriod != nil {
		if p := s.VerifyPeriod(); p > 0 {
			body["verify_period"], body["verify_period_ns"] = p.String(), p
		}
	}
	writeJSON(w, http.StatusOK, body)
}

func vmidParam(w http.ResponseWriter, r *http.Request) (int, bool) {
	raw := r.PathValue("vmid")
	vmid, err := strconv.Atoi(raw)
	// Decimal as in the subjects: no sign, no leading zeros.
	if err != nil || raw != strconv.Itoa(vmid) || vmid < events.MinVMID || vmid > events.MaxVMID {
		problem(w, http.StatusBadRequest, "vmid must be an integer within 100..999999999", nil)
		return 0, false
	}
	return vmid, true
}

func (s *Server) getGuest(w http.ResponseWriter, r *http.Request, _ caller) {
	vmid, ok := vmidParam(w, r)
	if !ok {
		return
	}
	d, err := s.Views.Guest(r.Context(), vmid)
	if err != nil {
		problem(w, http.StatusServiceUnavailable, "reading views: "+err.Error(), nil)
		return
	}
	if d == nil {
		problem(w, http.StatusNotFound, "converge has no view of guest "+strconv.Itoa(vmid)+" (no desired state and not observed yet)", nil)
		return
	}
	writeJSON(w, http.StatusOK, views.Summarise(d))
}

func (s *Server) postDesired(w http.ResponseWriter, r *http.Request, who caller) {
	vmid, ok := vmidParam(w, r)
	if !ok {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		problem(w, http.StatusRequestEntityTooLarge, "body too large or unreadable: "+err.Error(), nil)
		return
	}
	if _, err := events.DecodeDesired(body, vmid); err != nil {
		var ve *events.ValidationError
		if errors.As(err, &ve) {
			problem(w, http.StatusBadRequest, "invalid desired state; nothing was published", overHTTP(ve.Problems, r.URL.Path))
			return
		}
		problem(w, http.StatusInternalServerError, err.Error(), nil)
		return
	}
	pub := s.publisher(who)
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	m, err := events.DesiredBodyMessage(vmid, body, events.PublishOptions{Cluster: s.Cluster, Publisher: pub,
		CorrelationID: r.Header.Get("X-Correlation-Id")})
	if err != nil {
		problem(w, http.StatusInternalServerError, err.Error(), nil)
		return
	}
	if s.Sign != nil {
		if err := s.Sign(&m); err != nil {
			problem(w, http.StatusInternalServerError, "signing: "+err.Error(), nil)
			return
		}
	}
	ack, err := s.Journal.Append(ctx, m, journal.Expect{})
	if err != nil {
		publishFailed(w, fmt.Sprintf("publish desired %d", vmid), err)
		return
	}
	seq := ack.Seq
	s.Logger.Info().Int("vmid", vmid).Uint64("seq", seq).Str("publisher", pub).Msg("desired state accepted over HTTP")
	writeJSON(w, http.StatusAccepted, map[string]any{"vmid": vmid, "cluster": s.Cluster, "seq": seq})
}

// publisher is how the journal names the caller: the authenticated one,
// never a header the caller chose.
func (s *Server) publisher(who caller) string {
	if s.Guard.NoAuth {
		return "http (unauthenticated)"
	}
	return "token:" + who.name
}

type problemDoc struct {
	Error    string              `json:"error"`
	Problems []events.FieldError `json:"problems,omitempty"`
}

// publishFailed answers a write the journal did not take: 503 when it may
// take it later (NATS or the stream unavailable), 500 when this process's
// NATS user may not publish it at all: a deployment that serves /v1 from
// the wrong process, which only its operator can correct.
func publishFailed(w http.ResponseWriter, what string, err error) {
	if errors.Is(err, journal.ErrNotPermitted) {
		problem(w, http.StatusInternalServerError, fmt.Sprintf("%s: %v; this process cannot take writes: serve /v1 from `converge api` under the NATS user api (docs/http.md)", what, err), nil)
		return
	}
	problem(w, http.StatusServiceUnavailable, fmt.Sprintf("%s: %v", what, err), nil)
}

// overHTTP words the desired contract's problems for a caller of the
// HTTP API, which names the guest in the URL rather than a subject.
func overHTTP(ps []events.FieldError, path string) []events.FieldError {
	out := slices.Clone(ps)
	for i, p := range out {
		if p.Field == "vmid" {
			out[i].Message = strings.Replace(p.Message, "the subject is for", "the URL "+path+" is for", 1)
		}
	}
	return out
}

func problem(w http.ResponseWriter, code int, msg string, p []events.FieldError) {
	writeJSON(w, code, problemDoc{Error: msg, Problems: p})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
