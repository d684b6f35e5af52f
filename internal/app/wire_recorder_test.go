package app_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/internal/app"
	"github.com/converge-pve/converge/internal/observer"
	"github.com/converge-pve/converge/internal/pveschema"
	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/internal/pvesim/pvesimtest"
)

// wireRequest is one request as it went on the wire to Proxmox: the path
// without /api2/json, and its parameters (query and body merged, as
// Proxmox merges them), each key with every value it was sent with.
type wireRequest struct {
	Method, Path string
	Params       map[string][]string
	// Undecodable says why the body could not be read as parameters
	// (empty when it could): such a request is a violation by itself.
	Undecodable string
}

// wireRecorder is an HTTP server in front of the simulator that records
// every API request and hands it on unchanged. It sits in front of the
// simulator, not inside converge's client, so that it sees the bytes the
// client produced (go-proxmox's encoding included), and it leaves the
// simulator's own checks out of what is validated here.
type wireRecorder struct {
	srv   *httptest.Server
	ready chan struct{} // closed once target is set
	// target is the simulator's handler; set once, before ready closes.
	target http.Handler

	mu   sync.Mutex
	reqs []wireRequest
}

// newWireRecorder starts a recorder whose target is set later (setTarget):
// the pipeline's clients are made before its simulator is known. A
// request that arrives before waits for the target (or its own end).
func newWireRecorder(t *testing.T) *wireRecorder {
	w := &wireRecorder{ready: make(chan struct{})}
	w.srv = httptest.NewServer(http.HandlerFunc(w.serve))
	t.Cleanup(w.srv.Close)
	return w
}

func (w *wireRecorder) setTarget(h http.Handler) {
	w.target = h
	close(w.ready)
}

// url is the API base the clients are pointed at.
func (w *wireRecorder) url() string { return w.srv.URL + "/api2/json" }

func (w *wireRecorder) serve(rw http.ResponseWriter, r *http.Request) {
	select {
	case <-w.ready:
	case <-r.Context().Done():
		http.Error(rw, "recorder: no simulator yet", http.StatusServiceUnavailable)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if path, ok := strings.CutPrefix(r.URL.Path, "/api2/json"); ok {
		req := wireRequest{Method: r.Method, Path: path, Params: map[string][]string{}}
		for k, vs := range r.URL.Query() {
			req.Params[k] = append(req.Params[k], vs...)
		}
		req.Undecodable = decodeBody(r.Header.Get("Content-Type"), body, req.Params)
		w.mu.Lock()
		w.reqs = append(w.reqs, req)
		w.mu.Unlock()
	}
	w.target.ServeHTTP(rw, r)
}

// decodeBody adds a form or JSON body's parameters to params; it returns
// why the body could not be read, "" when it could (or is empty).
//
// Proxmox's schema types values as a form or query carries them: strings,
// booleans as 0/1. go-proxmox sends JSON bodies, which Proxmox's API
// server decodes and then checks against the same schema, turning a JSON
// true/false into 1/0 and a number into its decimal text first. The
// recorded values are normalised the same way (JSON booleans to 1/0,
// numbers to their text as sent) so that pveschema.Validate, which takes
// string values, judges them as Proxmox would; an array is one value per
// element, as a form repeats the key.
func decodeBody(contentType string, body []byte, params map[string][]string) string {
	if len(bytes.TrimSpace(body)) == 0 {
		return ""
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	switch mt {
	case "application/x-www-form-urlencoded":
		vs, err := url.ParseQuery(string(body))
		if err != nil {
			return "form body: " + err.Error()
		}
		for k, v := range vs {
			params[k] = append(params[k], v...)
		}
		return ""
	case "application/json":
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber() // keep a number's text as sent: 1024 stays 1024, not 1.024e+03
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			return "JSON body is not an object: " + err.Error()
		}
		var bad []string
		for k, v := range obj {
			vals, ok := jsonParam(v)
			if !ok {
				bad = append(bad, fmt.Sprintf("%s=%s (a JSON %T has no parameter form)", k, compact(v), v))
				continue
			}
			params[k] = append(params[k], vals...)
		}
		slices.Sort(bad)
		return strings.Join(bad, "; ")
	default:
		return fmt.Sprintf("body of content type %q", contentType)
	}
}

// jsonParam is a JSON value's parameter values, false for a value no
// Proxmox parameter takes (null, an object, a nested array).
func jsonParam(v any) ([]string, bool) {
	switch v := v.(type) {
	case string:
		return []string{v}, true
	case json.Number:
		return []string{v.String()}, true
	case bool:
		if v {
			return []string{"1"}, true
		}
		return []string{"0"}, true
	case []any:
		var out []string
		for _, e := range v {
			switch e.(type) {
			case []any, map[string]any, nil:
				return nil, false
			}
			s, _ := jsonParam(e)
			out = append(out, s...)
		}
		return out, true
	}
	return nil, false
}

func compact(v any) string { b, _ := json.Marshal(v); return string(b) }

func (w *wireRecorder) requests() []wireRequest {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.reqs)
}

// schemaViolations validates a request with pveschema, Proxmox's
// published schema, here in front of the simulator: what converge sent is
// judged by the schema, not by what the simulator accepts (which checks the
// same rules, and its handlers more). A key sent more than once (an array)
// has each value validated.
func schemaViolations(r wireRequest) []string {
	if r.Undecodable != "" {
		return []string{fmt.Sprintf("%s %s: body: %s", r.Method, r.Path, r.Undecodable)}
	}
	first := make(map[string]string, len(r.Params))
	for k, vs := range r.Params {
		first[k] = vs[0]
	}
	problems := pveschema.Validate(r.Method, r.Path, first)
	for k, vs := range r.Params {
		for _, v := range vs[1:] {
			each := maps.Clone(first)
			each[k] = v
			if msg, ok := pveschema.Validate(r.Method, r.Path, each)[k]; ok {
				problems[k+"="+v] = msg
			}
		}
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(problems)) {
		out = append(out, fmt.Sprintf("%s %s: %q: %s (sent %q)", r.Method, r.Path, k, problems[k], r.Params[k]))
	}
	return out
}

// operation names a request by its schema path template ("PUT
// /nodes/{node}/qemu/{vmid}/config"), the unit the counts are logged in.
func operation(r wireRequest) string {
	if op, _, ok := pveschema.Lookup(r.Method, r.Path); ok {
		return r.Method + " " + op.Path
	}
	return r.Method + " " + r.Path + " (not in the schema)"
}

// uncheckedSent names the request's top-level parameters whose schema
// format is one pveschema.UncheckedFormats lists ("PUT …/config
// tags (pve-tag-list)"); keys inside property strings are not looked at.
func uncheckedSent(r wireRequest) []string {
	op, _, ok := pveschema.Lookup(r.Method, r.Path)
	if !ok {
		return nil
	}
	skip := pveschema.UncheckedFormats()
	var out []string
	for k := range r.Params {
		for _, p := range op.Params {
			base, indexed := strings.CutSuffix(p.Name, "[n]")
			if !(p.Name == k || indexed && strings.HasPrefix(k, base) && strings.Trim(k[len(base):], "0123456789") == "" && len(k) > len(base)) {
				continue
			}
			f := p.Format
			if p.Items != nil {
				f = p.Items.Format
			}
			if f != "" && slices.Contains(skip, f) {
				out = append(out, fmt.Sprintf("%s %s (%s)", r.Method+" "+op.Path, k, f))
			}
		}
	}
	return out
}

// startRecordedPipeline is startPipeline with every client converge uses
// (the executor's and the observer's) talking to the simulator through a
// wireRecorder.
func startRecordedPipeline(t *testing.T, opts pvesim.Options, obsMod func(*observer.Config), mods ...func(*app.Config)) (*pipeline, *wireRecorder) {
	t.Helper()
	rec := newWireRecorder(t)
	mods = append(mods, func(c *app.Config) { c.Proxmox = pvesimtest.ClientAt(t, rec.url()) })
	p := startPipeline(t, opts, obsMod, mods...)
	rec.setTarget(p.sim.Handler())
	// The observer startPipeline made reads the simulator directly; this
	// one, configured the same, reads through the recorder. New does no
	// I/O, so the replaced one has sent nothing.
	obsCfg := observer.DefaultConfig()
	if obsMod != nil {
		obsMod(&obsCfg)
	}
	obsCfg.Logger = zerolog.Nop()
	var err error
	if p.obs, err = observer.New(obsCfg, pvesimtest.ClientAt(t, rec.url()), p.a.Bus()); err != nil {
		t.Fatal(err)
	}
	return p, rec
}
