package notify_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	jsonv1 "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/bus/bustest"
	"github.com/converge-pve/converge/internal/lease"
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

// leases creates the leases bucket with ttl.
func leases(t *testing.T, b *bus.Bus, ttl time.Duration) jetstream.KeyValue {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := b.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: lease.Bucket, History: 1, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// pollHas reports whether the poller's last reading of cluster pve has
// executor member.
func pollHas(b *bus.Bus, member string) func() bool {
	return func() bool {
		kv, err := b.JS.KeyValue(context.Background(), notify.Bucket)
		if err != nil {
			return false
		}
		e, err := kv.Get(context.Background(), "poll.pve")
		if err != nil {
			return false
		}
		var p struct{ Executors map[string][]int }
		_ = jsonv1.Unmarshal(e.Value(), &p)
		_, ok := p.Executors[member]
		return ok
	}
}

// An executor member lost twice (it put its membership again after a
// cut) is told twice, with two keys. Found by review.
func TestSameExecutorLostTwiceToldTwice(t *testing.T) {
	b := bustest.New(t)
	kv := leases(t, b, time.Second)
	rcv := newReceiver(t, nil)
	start(t, b, config(t, rcvCfg(rcv.srv.URL, "  triggers: [executor-lost]")), prometheus.NewRegistry())
	ctx := context.Background()
	for range 2 {
		if _, err := kv.Put(ctx, "executor-pve.m.ex-aaaa", []byte("x")); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "member seen", pollHas(b, "ex-aaaa"))
		// not renewed: it expires after the TTL (a stall, a network cut)
		waitFor(t, "member gone", func() bool { return !pollHas(b, "ex-aaaa")() })
	}
	for _, want := range []string{"pve/executor/ex-aaaa/lost/1", "pve/executor/ex-aaaa/lost/2"} {
		select {
		case k := <-rcv.got:
			if k != want {
				t.Errorf("told %s, want %s", k, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s never told", want)
		}
	}
}

// A guest in error that is blocked for a moment (Proxmox unreachable:
// the planner derives blocked first) and in error again is not told
// again; in error after a state it genuinely left error for, it is told
// again with a new key. Found by review.
func TestErrorAfterBlockedBlipNotToldAgain(t *testing.T) {
	b := bustest.New(t)
	rcv := newReceiver(t, nil)
	start(t, b, config(t, rcvCfg(rcv.srv.URL, "  triggers: [error, held]")), prometheus.NewRegistry())
	putGuest(t, b, 101, planner.Error, 7)
	if k := told(t, rcv); k != "pve/101/error/7" {
		t.Fatalf("told %s", k)
	}
	// The views bucket keeps one revision of a key: each document is
	// followed by a sentinel guest's first error, told once the route
	// read the document.
	var got []string
	for i, kind := range []planner.StatusKind{planner.Blocked, planner.Error,
		planner.Acting /* left error: retried */, planner.Error /* and failed again */} {
		putGuest(t, b, 101, kind, 7)
		putGuest(t, b, 300+i, planner.Error, 1)
		for k := ""; k != fmt.Sprintf("pve/%d/error/1", 300+i); {
			k = told(t, rcv)
			got = append(got, k)
		}
	}
	want := "pve/300/error/1 pve/301/error/1 pve/302/error/1 pve/101/error/7/e2 pve/303/error/1"
	if g := strings.Join(got, " "); g != want {
		t.Errorf("told %s, want %s", g, want)
	}
	if n := rcv.requests("pve/101/error/7"); n != 1 {
		t.Errorf("pve/101/error/7 sent %d times: %v", n, rcv.keys)
	}
}

// told is the next key the receiver accepted.
func told(t *testing.T, rcv *receiver) string {
	t.Helper()
	select {
	case k := <-rcv.got:
		return k
	case <-time.After(10 * time.Second):
		t.Fatalf("nothing told (requests %v)", rcv.keys)
	}
	return ""
}

// A redirect is not followed: a 302 would turn the POST into a GET (whose
// 2xx would count as delivered), a 307 to another host would take the
// route's secret headers there. It is a failed attempt, retried, then
// parked, naming the Location's host. Found by review.
func TestRedirectsNotFollowed(t *testing.T) {
	b := bustest.New(t)
	var gets, leaks atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != "" {
			leaks.Add(1)
		}
		w.WriteHeader(200)
	}))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/hook":
			http.Redirect(w, r, "/login?token=hidden", http.StatusFound)
		case "/login":
			gets.Add(1)
			w.WriteHeader(200)
		case "/moved":
			http.Redirect(w, r, other.URL+"/x", http.StatusTemporaryRedirect)
		}
	}))
	defer srv.Close()
	c, err := notify.Parse([]byte(fmt.Sprintf(`
routes:
- name: r
  url: %s/hook
  triggers: [error]
  retry: {max: 1, initial: 10ms}
- name: m
  url: %s/moved
  triggers: [error]
  headers: {X-Api-Key: {value: topsecret}}
  retry: {max: 1, initial: 10ms}
`, srv.URL, srv.URL)))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	start(t, b, c, reg)
	putGuest(t, b, 101, planner.Error, 7)
	for _, r := range []string{"r", "m"} {
		waitFor(t, r+" parked", func() bool { return counter(reg, "converge_notify_parked_total", r) == 1 })
		if n := counter(reg, "converge_notify_sent_total", r); n != 0 {
			t.Errorf("route %s: %v counted sent", r, n)
		}
	}
	if gets.Load() != 0 || leaks.Load() != 0 {
		t.Errorf("redirect followed: %d GETs, %d requests with the secret header elsewhere", gets.Load(), leaks.Load())
	}
	kv, err := b.JS.KeyValue(context.Background(), notify.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := kv.ListKeysFiltered(context.Background(), notify.ParkedFilter("r"))
	for k := range keys.Keys() {
		e, err := kv.Get(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		var p struct{ Reason string }
		_ = jsonv1.Unmarshal(e.Value(), &p)
		if !strings.Contains(p.Reason, "redirect") || !strings.Contains(p.Reason, "127.0.0.1") || strings.Contains(p.Reason, "hidden") {
			t.Errorf("parked reason %q: want the redirect and its host, not its URL", p.Reason)
		}
	}
}

// A number without a unit is refused as a duration (it would be
// nanoseconds), as are a header name that is no HTTP token, a key given
// twice and a throttle leaving less than half the timeout. Found by
// review.
func TestConfigRefusesAmbiguities(t *testing.T) {
	for name, yaml := range map[string]string{
		"bare timeout":   "routes:\n- name: r\n  url: https://e.com/\n  timeout: 30\n",
		"bare poll":      "poll: 3\nroutes:\n- name: r\n  url: https://e.com/\n",
		"bare initial":   "routes:\n- name: r\n  url: https://e.com/\n  retry: {initial: 1}\n",
		"header name":    "routes:\n- name: r\n  url: https://e.com/\n  headers: {\"Bad Header\": {value: x}}\n",
		"header value":   "routes:\n- name: r\n  url: https://e.com/\n  headers: {X-A: {value: \"a\\nb\"}}\n",
		"duplicate key":  "routes:\n- name: r\n  url: https://e.com/\n  url: https://f.com/\n",
		"tight throttle": "routes:\n- name: r\n  url: https://e.com/\n  timeout: 10s\n  throttle: {count: 1, per: 6s}\n",
	} {
		if _, err := notify.Parse([]byte(yaml)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := notify.Parse([]byte("poll: 2s\nroutes:\n- name: r\n  url: https://e.com/\n  timeout: 10s\n  throttle: {count: 1, per: 5s}\n  headers: {X-Api-Key: {value: x}}\n")); err != nil {
		t.Errorf("a valid file refused: %v", err)
	}
}

// A route added later is not sent the poller's notices found before it
// existed (its notices consumer starts at its creation, as its guests'
// baseline does). Found by review.
func TestNewRouteNotSentOldNotices(t *testing.T) {
	b := bustest.New(t)
	kv := leases(t, b, time.Second)
	rcv := newReceiver(t, nil)
	stop := start(t, b, config(t, rcvCfg(rcv.srv.URL, "  triggers: [executor-lost]")), prometheus.NewRegistry())
	if _, err := kv.Put(context.Background(), "executor-pve.m.ex-cccc", []byte("x")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "member seen", pollHas(b, "ex-cccc"))
	k := told(t, rcv)
	stop()
	rcv2 := newReceiver(t, nil)
	c := config(t, rcvCfg(rcv.srv.URL, "  triggers: [executor-lost]")+fmt.Sprintf(`
- name: added-later
  url: %s
  headers: {Authorization: {env: NOTIFY_TEST_TOKEN}}
  triggers: [executor-lost]
`, rcv2.srv.URL))
	start(t, b, c, prometheus.NewRegistry())
	// A new loss after it started is sent to it: it reads the notices.
	if _, err := kv.Put(context.Background(), "executor-pve.m.ex-dddd", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if k2 := told(t, rcv2); k2 != "pve/executor/ex-dddd/lost/1" {
		t.Errorf("the route created now was sent %s (the old one told as %s)", k2, k)
	}
}

// An executor that left gracefully while the notifier was down longer
// than the leases' TTL (its delete marker aged out with it) is not told
// lost: a member gone over a gap longer than the TTL cannot be told lost
// from left. Found by review.
func TestLeaveWhileDownLongerThanTTLNotLost(t *testing.T) {
	b := bustest.New(t)
	kv := leases(t, b, time.Second)
	rcv := newReceiver(t, nil)
	c := config(t, rcvCfg(rcv.srv.URL, "  triggers: [executor-lost]"))
	stop := start(t, b, c, prometheus.NewRegistry())
	ctx := context.Background()
	if _, err := kv.Put(ctx, "executor-pve.m.ex-bbbb", []byte("x")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "member seen", pollHas(b, "ex-bbbb"))
	// `converge up` restarting: notifier and executor stop together, the
	// executor leaving gracefully.
	stop()
	if err := kv.Delete(ctx, "executor-pve.m.ex-bbbb"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond) // down longer than the TTL: the marker is gone
	start(t, b, c, prometheus.NewRegistry())
	waitFor(t, "member forgotten", func() bool { return !pollHas(b, "ex-bbbb")() })
	// A loss after that is told: the gap is over.
	if _, err := kv.Put(ctx, "executor-pve.m.ex-eeee", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if k := told(t, rcv); k != "pve/executor/ex-eeee/lost/1" {
		t.Errorf("told %s, want only the later loss", k)
	}
}

// A second notifier for a cluster whose notifier runs refuses to start
// (the two would split each route's consumers); once the first stopped,
// one starts at once. Found by review.
func TestSecondNotifierForClusterRefused(t *testing.T) {
	b := bustest.New(t)
	rcv := newReceiver(t, nil)
	c := config(t, rcvCfg(rcv.srv.URL, "  triggers: [error]"))
	stop := start(t, b, c, prometheus.NewRegistry())
	waitFor(t, "first owns", func() bool {
		kv, err := b.JS.KeyValue(context.Background(), notify.Bucket)
		if err != nil {
			return false
		}
		_, err = kv.Get(context.Background(), "owner.pve")
		return err == nil
	})
	n, err := notify.New(notify.Options{Config: c, Cluster: "pve", ViewsBucket: bus.DefaultBucket, JS: b.JS})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.Run(ctx); err == nil || !strings.Contains(err.Error(), "another notifier") {
		t.Fatalf("second notifier: %v", err)
	}
	stop()
	start(t, b, c, prometheus.NewRegistry())
	putGuest(t, b, 101, planner.Error, 7)
	if k := told(t, rcv); k != "pve/101/error/7" {
		t.Errorf("told %s", k)
	}
}
