package notify_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/bus/bustest"
	"github.com/converge-pve/converge/internal/notify"
	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
	"github.com/converge-pve/converge/projector"
)

// receiver is a test webhook: it records every request's key and answers
// what answer says for the n-th request (1-based) of each key.
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	keys   []string       // every request's X-Converge-Key, in order
	byKey  map[string]int // requests per key
	answer func(key string, n int) int
	got    chan string // each accepted key
}

func newReceiver(t *testing.T, answer func(key string, n int) int) *receiver {
	r := &receiver{byKey: map[string]int{}, answer: answer, got: make(chan string, 1024)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		var n notify.Notice
		if err := json.Unmarshal(b, &n); err != nil {
			t.Errorf("body not a notice: %v: %s", err, b)
		}
		k := req.Header.Get("X-Converge-Key")
		if k == "" || k != n.Key || req.Header.Get("Idempotency-Key") != k {
			t.Errorf("keys differ: header %q, idempotency %q, body %q", k, req.Header.Get("Idempotency-Key"), n.Key)
		}
		if req.Header.Get("Authorization") != "Bearer s3cret" {
			t.Errorf("header from the environment not sent")
		}
		r.mu.Lock()
		r.keys = append(r.keys, k)
		r.byKey[k]++
		nth := r.byKey[k]
		r.mu.Unlock()
		code := http.StatusOK
		if r.answer != nil {
			code = r.answer(k, nth)
		}
		w.WriteHeader(code)
		if code/100 == 2 {
			r.got <- k
		}
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) requests(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byKey[key]
}

// putGuest writes a guest document as the planner would.
func putGuest(t *testing.T, b *bus.Bus, vmid int, kind planner.StatusKind, rev uint64) {
	t.Helper()
	doc := views.GuestDoc{View: &projector.View{VMID: vmid, Cluster: "pve", DesiredSeq: rev, DesiredAt: time.Now()},
		Status: planner.Status{Kind: kind, Reason: "test"}, UpdatedAt: time.Now()}
	if kind == planner.Rejected { // rev is then the rejected event's
		doc.View.Rejected = &projector.Rejection{Seq: rev, Reason: "test"}
	}
	raw, err := jsonv1.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := b.JS.Publish(ctx, "$KV."+bus.DefaultBucket+"."+views.GuestKey("pve", vmid), raw); err != nil {
		t.Fatal(err)
	}
}

func config(t *testing.T, yaml string) notify.Config {
	t.Helper()
	t.Setenv("NOTIFY_TEST_TOKEN", "Bearer s3cret")
	c, err := notify.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// start runs a notifier until the test ends or stop is called.
func start(t *testing.T, b *bus.Bus, c notify.Config, reg *prometheus.Registry) (stop func()) {
	t.Helper()
	n, err := notify.New(notify.Options{Config: c, Cluster: "pve", ViewsBucket: bus.DefaultBucket, JS: b.JS,
		Registerer: reg, Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel), AckWait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("notifier: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func counter(reg *prometheus.Registry, name, route string) float64 {
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "route" && l.GetValue() == route {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return -1
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second) // a bound, not a measurement
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition
	}
}

// A receiver answering 500 three times is retried (same key each time)
// and then receives; the failures and the delivery are counted.
func TestRetriedThenDelivered(t *testing.T) {
	b := bustest.New(t)
	rcv := newReceiver(t, func(_ string, n int) int {
		if n <= 3 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	c := config(t, fmt.Sprintf(`
routes:
- name: flaky
  url: %s
  headers: {Authorization: {env: NOTIFY_TEST_TOKEN}}
  triggers: [error]
  retry: {max: 5, initial: 20ms, max_interval: 200ms}
`, rcv.srv.URL))
	reg := prometheus.NewRegistry()
	start(t, b, c, reg)
	putGuest(t, b, 101, planner.Error, 7)
	key := <-rcv.got
	if key != "pve/101/error/7" {
		t.Fatalf("key %q", key)
	}
	if n := rcv.requests(key); n != 4 {
		t.Fatalf("%d requests, want 4 (3 refused, then accepted)", n)
	}
	// The router's own metrics are recorded once the handler has
	// returned, a moment after the delivery is counted (CI under load
	// read them in between).
	waitFor(t, "metrics", func() bool {
		n, err := testutil.GatherAndCount(reg, "converge_notify_handler_execution_time_seconds")
		return counter(reg, "converge_notify_sent_total", "flaky") == 1 && counter(reg, "converge_notify_failed_total", "flaky") == 3 &&
			err == nil && n > 0
	})
	if p := counter(reg, "converge_notify_parked_total", "flaky"); p != 0 {
		t.Fatalf("parked %v", p)
	}
}

// A receiver that always fails is parked after its retries while another
// route delivers every notice: the good route receives all of them while
// the bad route's handler is still inside its first notice's retries
// (its receiver holds the second attempt until the test lets it go).
func TestFailingRouteParkedOthersDeliver(t *testing.T) {
	b := bustest.New(t)
	good := newReceiver(t, nil)
	inRetry, release := make(chan struct{}), make(chan struct{})
	var once, released sync.Once
	let := func() { released.Do(func() { close(release) }) }
	t.Cleanup(let) // a failing test must not leave the receiver held
	bad := newReceiver(t, func(_ string, n int) int {
		if n == 2 {
			once.Do(func() { close(inRetry); <-release })
		}
		return http.StatusInternalServerError
	})
	c := config(t, fmt.Sprintf(`
routes:
- name: good
  url: %s
  headers: {Authorization: {env: NOTIFY_TEST_TOKEN}}
  triggers: [error]
- name: bad
  url: %s
  format: json
  triggers: [error]
  headers: {Authorization: {env: NOTIFY_TEST_TOKEN}}
  retry: {max: 2, initial: 10ms, max_interval: 20ms}
  timeout: 30s
`, good.srv.URL, bad.srv.URL))
	reg := prometheus.NewRegistry()
	start(t, b, c, reg)
	const guests = 5
	for i := range guests {
		putGuest(t, b, 200+i, planner.Error, uint64(10+i))
	}
	<-inRetry
	want := map[string]bool{}
	for i := range guests {
		want[fmt.Sprintf("pve/%d/error/%d", 200+i, 10+i)] = true
	}
	for len(want) > 0 {
		delete(want, <-good.got)
	}
	// All delivered by the good route; the bad one is still in its first
	// notice's second attempt, nothing parked.
	bad.mu.Lock()
	distinct := len(bad.byKey)
	bad.mu.Unlock()
	if distinct != 1 || counter(reg, "converge_notify_parked_total", "bad") != 0 {
		t.Fatalf("bad route: %d notices tried, %v parked; want 1 and 0 while it is held", distinct, counter(reg, "converge_notify_parked_total", "bad"))
	}
	let()
	waitFor(t, "every notice of the bad route parked", func() bool {
		return counter(reg, "converge_notify_parked_total", "bad") == guests
	})
	if f := counter(reg, "converge_notify_failed_total", "bad"); f != 3*guests {
		t.Fatalf("bad route: %v failed attempts, want %d (1 + 2 retries each)", f, 3*guests)
	}
	// The poison records are in the notifier's bucket.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := b.JS.KeyValue(ctx, notify.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.ListKeysFiltered(ctx, notify.ParkedFilter("bad"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range keys.Keys() {
		n++
	}
	if n != guests {
		t.Fatalf("%d parked records, want %d", n, guests)
	}
	if s := counter(reg, "converge_notify_sent_total", "good"); s != guests {
		t.Fatalf("good route sent %v, want %d", s, guests)
	}
}
