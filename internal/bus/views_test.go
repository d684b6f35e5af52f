package bus_test

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/converge-pve/converge/internal/bus/bustest"
)

// TestViewWatchEndedEarlyLeaksNothing: a watch ended before it has read
// the current values (a console closed before its stream caught up, a
// slow reader dropped) leaves no goroutine behind. Found by review: nats.go
// delivers into a channel of 256 and blocks when it is full, so a watch
// stopped with more than that queued held its delivery goroutine forever;
// the HTTP API runs for weeks and serves a stream per console.
func TestViewWatchEndedEarlyLeaksNothing(t *testing.T) {
	b := bustest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := b.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	vs, err := b.ViewStore()
	if err != nil {
		t.Fatal(err)
	}
	const docs = 1000
	for i := range docs {
		f, err := vs.PutAsync("pve."+strconv.Itoa(100+i), []byte(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		if i == docs-1 {
			if _, err := f.Wait(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range 5 {
		wctx, wcancel := context.WithCancel(ctx)
		got := make(chan struct{}, 1)
		done, err := vs.Watch(wctx, "pve.*", func(string, []byte) {
			select {
			case got <- struct{}{}:
			default:
			}
			<-wctx.Done() // a reader that stops after the first value
		})
		if err != nil {
			t.Fatal(err)
		}
		<-got
		// Until nats.go's delivery is blocked on the full channel.
		for blocked := time.Now().Add(20 * time.Second); time.Now().Before(blocked); time.Sleep(10 * time.Millisecond) { // polling a condition
			if stuckSends() > 0 {
				break
			}
		}
		wcancel()
		<-done
	}
	// The delivery goroutines end once drained: wait for that, then fail
	// if any is still blocked.
	stuck := stuckSends
	deadline := time.Now().Add(20 * time.Second)
	for stuck() > 0 && time.Now().Before(deadline) {
		runtime.Gosched()
		time.Sleep(50 * time.Millisecond) // polling a condition, not synchronising
	}
	if n := stuck(); n > 0 {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d nats.go watch goroutines left after every watch ended:\n%s", n, buf[:runtime.Stack(buf, true)])
	}
}

// stuckSends counts nats.go's KV watch deliveries blocked on a send.
func stuckSends() int {
	buf := make([]byte, 1<<22)
	n := 0
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "[chan send") && strings.Contains(g, "jetstream.(*kvs).WatchFiltered") {
			n++
		}
	}
	return n
}
