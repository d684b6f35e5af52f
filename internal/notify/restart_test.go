package notify_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/bus/bustest"
	"github.com/converge-pve/converge/internal/notify"
	"github.com/converge-pve/converge/planner"
)

// A notifier stopped and started again neither repeats what it delivered
// nor misses what happened meanwhile; a route's consumer deleted under it
// is created again and the route goes on without repeating itself.
func TestRestartNeitherMissesNorRepeats(t *testing.T) {
	b := bustest.New(t)
	rcv := newReceiver(t, nil)
	c := config(t, fmt.Sprintf(`
condition_grace: -1s # conditions told at once
routes:
- name: r
  url: %s
  headers: {Authorization: {env: NOTIFY_TEST_TOKEN}}
  retry: {max: 2, initial: 10ms}
`, rcv.srv.URL))
	// wait receives keys until every one of want came; it returns them
	// all, in order.
	wait := func(want ...string) {
		t.Helper()
		missing := map[string]bool{}
		for _, k := range want {
			missing[k] = true
		}
		for len(missing) > 0 {
			select {
			case k := <-rcv.got:
				delete(missing, k)
			case <-time.After(60 * time.Second): // a bound, not a measurement
				t.Fatalf("never received %v", missing)
			}
		}
	}
	stop := start(t, b, c, prometheus.NewRegistry())
	// The poller's first notices (no planner runs here): the route's
	// consumers exist, so 301's desired state is published after them (a
	// guest first seen converged from before is the baseline).
	wait("pve/role/no-planner/1")
	putGuest(t, b, 301, planner.Pending, 5)
	putGuest(t, b, 301, planner.Converged, 5)
	wait("pve/301/converged/5")
	// Stopped once it recorded the delivery: a stop while the answer is on
	// its way is a delivery in flight, which the next run repeats.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, err := b.JS.KeyValue(ctx, notify.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "301's record", func() bool {
		e, err := kv.Get(ctx, "g.r.pve.301") // the route's record of the guest
		return err == nil && strings.Contains(string(e.Value()), `"converged":5`)
	})
	stop()

	// Meanwhile: 301 rewritten as it was, 302 enters error.
	putGuest(t, b, 301, planner.Converged, 5)
	putGuest(t, b, 302, planner.Error, 6)
	start(t, b, c, prometheus.NewRegistry())
	// A sentinel after them: once it came, they were handled (one route
	// reads the views in order).
	putGuest(t, b, 399, planner.Error, 1)
	wait("pve/302/error/6", "pve/399/error/1")

	// Its consumer deleted (as a rebuild of the views bucket would): it is
	// created again, reads every document again, and tells only what is new.
	if err := b.JS.DeleteConsumer(ctx, "KV_"+bus.DefaultBucket, notify.Consumer("pve", "r")); err != nil {
		t.Fatal(err)
	}
	putGuest(t, b, 303, planner.Rejected, 7)
	wait("pve/303/rejected/7")
	putGuest(t, b, 398, planner.Error, 2)
	wait("pve/398/error/2")
	for k, n := range map[string]int{"pve/301/converged/5": 1, "pve/302/error/6": 1, "pve/399/error/1": 1, "pve/303/rejected/7": 1} {
		if got := rcv.requests(k); got != n {
			rcv.mu.Lock()
			t.Errorf("%s: %d requests, want %d (all: %v)", k, got, n, rcv.keys)
			rcv.mu.Unlock()
		}
	}
}
