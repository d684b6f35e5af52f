package notify_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/bus/bustest"
	"github.com/converge-pve/converge/internal/notify"
	"github.com/converge-pve/converge/planner"
)

// rcvCfg is one route r to url, retried once, with extra lines after it.
func rcvCfg(url, extra string) string {
	return fmt.Sprintf(`
condition_grace: -1s
poll: 200ms
routes:
- name: r
  url: %s
  headers: {Authorization: {env: NOTIFY_TEST_TOKEN}}
  retry: {max: 1, initial: 10ms}
%s`, url, extra)
}

// Two clusters' notifiers on one NATS, each with a route named r, have
// a consumer each: a second cluster's notifier starting does not take
// the first's notices. Found by review.
func TestSameRouteNameInTwoClustersKeepsBoth(t *testing.T) {
	b := bustest.New(t)
	rcv := newReceiver(t, nil)
	c := config(t, rcvCfg(rcv.srv.URL, "  triggers: [error]"))
	start(t, b, c, prometheus.NewRegistry())
	n, err := notify.New(notify.Options{Config: c, Cluster: "pve2", ViewsBucket: bus.DefaultBucket, JS: b.JS})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = n.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	// pve2's notifier has bound its consumers once they exist.
	waitFor(t, "pve2's consumers", func() bool {
		_, err1 := b.JS.Consumer(context.Background(), "KV_"+bus.DefaultBucket, notify.Consumer("pve2", "r"))
		_, err2 := b.JS.Consumer(context.Background(), "KV_"+notify.Bucket, notify.Consumer("pve2", "r"))
		return err1 == nil && err2 == nil
	})
	putGuest(t, b, 101, planner.Error, 7)
	select {
	case k := <-rcv.got:
		if k != "pve/101/error/7" {
			t.Errorf("told %s", k)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("cluster pve's error never told once a pve2 notifier with a route of the same name started")
	}
}
