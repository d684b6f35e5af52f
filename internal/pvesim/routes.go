package pvesim

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// routes builds the top-level handler: /_sim control path, then /api2/json
// with call counting, unreachability, latency, auth and 501 for unknown paths.
func (s *Sim) routes() http.Handler {
	api := http.NewServeMux()
	s.apiRoutes(api)
	ctl := http.NewServeMux()
	s.controlRoutes(ctl)

	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		normalizeAPIPath(r)
		if strings.HasPrefix(r.URL.Path, "/_sim/") {
			ctl.ServeHTTP(w, r)
			return
		}
		if !strings.HasPrefix(r.URL.Path, "/api2/json/") {
			writeError(w, &apiError{status: 501, msg: fmt.Sprintf("Method '%s %s' not implemented", r.Method, r.URL.Path)})
			return
		}
		s.calls.Add(1)
		if s.unreachable() {
			dropConnection(w)
			return
		}
		mutating := r.Method != http.MethodGet && r.URL.Path != "/api2/json/access/ticket"
		if mutating {
			s.mutations.Add(1)
			if s.opts.OnMutation != nil {
				s.opts.OnMutation(Mutation{Method: r.Method, Path: r.URL.Path, VMID: vmidFromPath(r.URL.Path), At: time.Now()})
			}
		}
		// Handler only finds the pattern; ServeHTTP also sets PathValue.
		_, pattern := api.Handler(r)
		// The call holds an API worker for its latency and its handler
		// (apiworkers.go).
		pool := s.poolFor(r.Method, r.URL.Path, pattern)
		if !pool.acquire(r.Context()) {
			return
		}
		if pool.sem != nil {
			h := &workerHold{pool: pool, held: true}
			defer h.release()
			r = r.WithContext(context.WithValue(r.Context(), holdKey{}, h))
		}
		if d := time.Duration(s.faultsNow().Latency); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return
			}
		}
		if pattern == "" {
			writeError(w, &apiError{status: 501, msg: fmt.Sprintf("Method '%s %s' not implemented", r.Method, strings.TrimPrefix(r.URL.Path, "/api2/json"))})
			return
		}
		api.ServeHTTP(w, r)
	})
}

// vmidFromPath extracts the guest id from …/qemu/{vmid}/… or …/lxc/{vmid}/….
func vmidFromPath(p string) int {
	parts := strings.Split(p, "/")
	for i := 0; i+1 < len(parts); i++ {
		if parts[i] == "qemu" || parts[i] == "lxc" {
			if n, err := strconv.Atoi(parts[i+1]); err == nil {
				return n
			}
		}
	}
	return 0
}

// handle registers an authenticated API endpoint.
func (s *Sim) handle(mux *http.ServeMux, pattern string, fn apiFunc) {
	method, path, _ := strings.Cut(pattern, " ")
	s.served = append(s.served, pattern)
	mux.HandleFunc(method+" /api2/json"+path, func(w http.ResponseWriter, r *http.Request) {
		user, err := s.authenticate(r)
		if err != nil {
			if d := time.Duration(s.faultsNow().AuthFailDelay); d > 0 {
				releaseWorker(r)
				time.Sleep(d)
			}
			writeError(w, err.(*apiError))
			return
		}
		s.serve(w, r, method+" "+path, user, fn)
	})
}

// handleOpen registers an endpoint that needs no auth (the ticket login).
func (s *Sim) handleOpen(mux *http.ServeMux, pattern string, fn apiFunc) {
	method, path, _ := strings.Cut(pattern, " ")
	s.served = append(s.served, pattern)
	mux.HandleFunc(method+" /api2/json"+path, func(w http.ResponseWriter, r *http.Request) {
		s.serve(w, r, method+" "+path, "", fn)
	})
}

// serve answers a request to the registered pattern: parameters parsed
// and checked against the operation's API schema (schemaCheck), then fn.
func (s *Sim) serve(w http.ResponseWriter, r *http.Request, pattern, user string, fn apiFunc) {
	params, err := parseParams(r)
	if err == nil {
		err = schemaCheck(r, pattern, params)
	}
	if err == nil {
		var data any
		data, err = fn(&req{r: r, params: params, user: user})
		if err == nil {
			writeData(w, data)
			return
		}
	}
	if ae, ok := err.(*apiError); ok {
		if ae.status == 401 {
			if d := time.Duration(s.faultsNow().AuthFailDelay); d > 0 {
				releaseWorker(r)
				time.Sleep(d)
			}
		}
		writeError(w, ae)
		return
	}
	writeError(w, &apiError{status: 500, msg: err.Error()})
}

// authenticate checks an API token or a ticket cookie (with the CSRF token on
// writes) and returns the identity tasks are recorded under.
func (s *Sim) authenticate(r *http.Request) (string, error) {
	if h := r.Header.Get("Authorization"); h != "" {
		rest, ok := strings.CutPrefix(h, "PVEAPIToken")
		if !ok || len(rest) < 2 || (rest[0] != '=' && rest[0] != ' ') {
			return "", &apiError{status: 401, msg: "authentication failure"}
		}
		id, secret, ok := strings.Cut(rest[1:], "=")
		if !ok {
			return "", &apiError{status: 401, msg: "invalid token value!"}
		}
		want, known := s.opts.Tokens[id]
		if !known || !hmac.Equal([]byte(want), []byte(secret)) {
			return "", &apiError{status: 401, msg: "invalid token value!"}
		}
		return id, nil
	}
	c, err := r.Cookie("PVEAuthCookie")
	if err != nil || c.Value == "" {
		return "", &apiError{status: 401, msg: "No ticket"}
	}
	// Cookies may arrive URL-encoded (browsers) or raw (go-proxmox).
	val, uerr := url.PathUnescape(c.Value)
	if uerr != nil {
		val = c.Value
	}
	s.mu.Lock()
	t, ok := s.tickets[val]
	s.mu.Unlock()
	if !ok || time.Now().After(t.expires) {
		return "", &apiError{status: 401, msg: "authentication failure"}
	}
	if r.Method != http.MethodGet && r.Header.Get("CSRFPreventionToken") != t.csrf {
		return "", &apiError{status: 401, msg: "Permission denied - invalid csrf token"}
	}
	return t.user, nil
}

// login implements POST /access/ticket (JSON or form), including renewal
// with a valid ticket passed as the password.
func (s *Sim) login(q *req) (any, error) {
	user := q.str("username")
	if realm := q.str("realm"); realm != "" && !strings.Contains(user, "@") {
		user += "@" + realm
	}
	pass := q.str("password")
	if user == "" {
		return nil, paramErr1("username", "property is missing and it is not optional")
	}
	if pass == "" {
		return nil, paramErr1("password", "property is missing and it is not optional")
	}
	s.mu.Lock()
	old, renewing := s.tickets[pass]
	s.mu.Unlock()
	valid := user == DefaultUser && s.opts.Password != "" && hmac.Equal([]byte(pass), []byte(s.opts.Password))
	if renewing && old.user == user && time.Now().Before(old.expires) {
		valid = true
	}
	if !valid {
		return nil, &apiError{status: 401, msg: "authentication failure"}
	}
	now := time.Now()
	hexT := fmt.Sprintf("%08X", now.Unix())
	mac := hmac.New(sha256.New, []byte(s.opts.Password+"pvesim"))
	fmt.Fprintf(mac, "%s:%s:%d", user, hexT, now.UnixNano())
	sig := base64.StdEncoding.EncodeToString(mac.Sum(nil))
	tk := fmt.Sprintf("PVE:%s:%s::%s", user, hexT, sig)
	csrf := fmt.Sprintf("%s:%s", hexT, base64.RawStdEncoding.EncodeToString(mac.Sum([]byte("csrf")))[:43])
	s.mu.Lock()
	s.tickets[tk] = ticket{user: user, csrf: csrf, expires: now.Add(2 * time.Hour)}
	s.mu.Unlock()
	return map[string]any{
		"username":            user,
		"ticket":              tk,
		"CSRFPreventionToken": csrf,
		"clustername":         s.clusterName(),
		"cap": map[string]any{
			"vms":     map[string]int{"VM.PowerMgmt": 1, "VM.Config.Options": 1, "VM.Allocate": 1, "VM.Clone": 1, "VM.Audit": 1},
			"nodes":   map[string]int{"Sys.Audit": 1},
			"storage": map[string]int{"Datastore.Allocate": 1},
		},
	}, nil
}
