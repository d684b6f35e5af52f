package app_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/internal/api"
	"github.com/converge-pve/converge/internal/app"
	"github.com/converge-pve/converge/internal/natsserver"
	"github.com/converge-pve/converge/internal/pvesim/pvesimtest"
)

// The process wires the console's reads: a guest's timeline comes from
// the journal (a pause with its reason, posted over HTTP, is in it), and
// an open stream ends cleanly when the process stops (EndStreams at the
// server's Shutdown; api's TestStream checks EndStreams itself: here
// closing NATS would end the stream's watch too).
func TestConsoleTimelineAndStreamShutdown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := app.DefaultConfig()
	cfg.Roles, cfg.Embedded = app.Roles{Planner: true}, &natsserver.Options{DataDir: t.TempDir(), Listen: "127.0.0.1:-1"}
	cfg.HTTP, cfg.Logger = "127.0.0.1:0", zerolog.Nop()
	cfg.HTTPAuth.Guard = api.Guard{NoAuth: true}
	a, err := app.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			cancel()
			_ = a.Wait()
		}
	})
	tctx := pvesimtest.Context(t)
	base := "http://" + a.HTTPAddr()
	req, _ := http.NewRequestWithContext(tctx, "POST", base+"/v1/pause", bytes.NewReader([]byte(`{"vmids":[101],"reason":"disk swap"}`)))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("pause: %d", res.StatusCode)
	}
	req, _ = http.NewRequestWithContext(tctx, "GET", base+"/v1/guests/101/timeline?limit=10", nil)
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var page struct {
		VMID    int `json:"vmid"`
		Entries []struct {
			Kind, Who, Summary string
		}
		NextBefore uint64 `json:"next_before"`
	}
	err = json.NewDecoder(res.Body).Decode(&page)
	_ = res.Body.Close()
	if err != nil || res.StatusCode != http.StatusOK || page.VMID != 101 || len(page.Entries) != 1 || page.NextBefore != 0 ||
		page.Entries[0].Kind != "control" || page.Entries[0].Who != "http (unauthenticated)" ||
		!strings.HasSuffix(page.Entries[0].Summary, `reason: "disk swap"`) {
		t.Fatalf("timeline: %d %v %+v", res.StatusCode, err, page)
	}

	req, _ = http.NewRequestWithContext(tctx, "GET", base+"/v1/stream", nil)
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	if !sc.Scan() || !strings.Contains(sc.Text(), `"type":"hello"`) {
		t.Fatalf("stream: %d %q %v", res.StatusCode, sc.Text(), sc.Err())
	}
	cancel()
	if err := a.Wait(); err != nil {
		t.Fatalf("stopping with a stream open: %v", err)
	}
	stopped = true
	for sc.Scan() {
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("the stream did not end cleanly: %v", err)
	}
}
