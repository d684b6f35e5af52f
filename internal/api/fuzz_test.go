package api_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/api"
	"github.com/converge-pve/converge/internal/journal/journaltest"
)

// FuzzPostDesired: whatever a caller posts, POST /v1/desired publishes
// exactly the bodies the planner accepts for that guest (202, the body
// journalled byte for byte under the token's name) and nothing else (a
// 4xx with a JSON problem).
func FuzzPostDesired(f *testing.F) {
	for _, s := range []string{
		`{"vmid":101,"power":"running","cores":2}`, `{"vmid":101,"cores":2,"cores":3}`, `{"vmid":102}`,
		`{"vmid":101,"power":"on"}`, `{"vmid":101,"tags":["a;b"]}`, ``, `null`, `{"vmid":101}{}`,
	} {
		f.Add("101", "application/json", []byte(s))
	}
	f.Add("0101", "application/json", []byte(`{"vmid":101}`))
	f.Add("101", "text/plain", []byte(`{"vmid":101}`))
	f.Add("101", "application/json; charset=utf-8", []byte(`{"vmid":101,"name":"\u00e9"}`))
	tokens, err := api.ParseTokens("t", []byte(testTokens))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, vmid, ctype string, body []byte) {
		j := journaltest.New(16, time.Now)
		s := &api.Server{Cluster: "pve", Journal: j, Logger: zerolog.Nop(), Guard: api.Guard{Tokens: tokens}}
		req := httptest.NewRequest("POST", "/v1/desired/x", bytes.NewReader(body))
		req.SetPathValue("vmid", vmid)
		req.URL.Path = "/v1/desired/" + vmid
		req.Host = "127.0.0.1:8080"
		req.Header.Set("Authorization", "Bearer "+portalToken)
		req.Header.Set("Content-Type", ctype)
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		published := j.Entries()
		id, perr := strconv.Atoi(vmid)
		_, derr := events.DecodeDesired(body, id)
		ok := perr == nil && strconv.Itoa(id) == vmid && id >= events.MinVMID && id <= events.MaxVMID && derr == nil
		switch {
		case rec.Code == http.StatusAccepted:
			if !ok || len(published) != 1 || !bytes.Equal(published[0].Data, body) ||
				published[0].Header.Get(events.HeaderPublisher) != "token:portal" {
				t.Fatalf("published %d entries for %q %q %q (decodes: %v)", len(published), vmid, ctype, body, derr)
			}
		case rec.Code == http.StatusNotFound || rec.Code == http.StatusMethodNotAllowed || rec.Code/100 == 3:
			// The mux did not route a path with this vmid (or redirected
			// an unclean one): nothing ran.
			if len(published) != 0 {
				t.Fatalf("status %d published %d entries", rec.Code, len(published))
			}
		case rec.Code >= 400 && rec.Code < 500:
			if len(published) != 0 {
				t.Fatalf("status %d published %d entries", rec.Code, len(published))
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Fatalf("status %d answered %q", rec.Code, ct)
			}
		default:
			t.Fatalf("status %d for %q %q %q: %s", rec.Code, vmid, ctype, body, rec.Body)
		}
	})
}
