package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/journal"
)

// refusing is a journal whose writer may not publish (a process serving
// /v1 under a NATS user without the permission).
type refusing struct{}

func (refusing) Append(context.Context, events.Message, journal.Expect) (journal.Ack, error) {
	return journal.Ack{}, fmt.Errorf(`NATS user "planner" may not publish to pve.desired.pve.101: %w`, journal.ErrNotPermitted)
}

// TestWriteNotPermitted: a write the process may not make is answered at
// once with 500 and what to do, not a 503 after a timeout: retrying cannot
// help, only serving /v1 from the right process can.
func TestWriteNotPermitted(t *testing.T) {
	f := newFixture(t)
	f.server.Journal = refusing{}
	f.h = f.server.Handler()
	for _, c := range []struct{ path, body string }{
		{"/v1/desired/101", `{"vmid":101,"power":"running"}`},
		{"/v1/approve", `{"vmids":[101]}`},
	} {
		r := f.do(t, "POST", c.path, []byte(c.body))
		if r.code != http.StatusInternalServerError || !strings.Contains(string(r.body), "converge api") ||
			!strings.Contains(string(r.body), `\"planner\"`) {
			t.Errorf("POST %s: %d %s", c.path, r.code, r.body)
		}
	}
}
