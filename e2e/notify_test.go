package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	jsonv1 "github.com/go-json-experiment/json/v1"
	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/natsauth"
	"github.com/converge-pve/converge/internal/natsserver"
	"github.com/converge-pve/converge/internal/notify"
	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/internal/views"
	"github.com/converge-pve/converge/planner"
)

// TestNotifyAcrossKills runs the roles, the simulator and `converge
// notify` as separate processes on a NATS server holding the table's
// users (each process as its own user, the notifier as notify), SIGKILLs
// the executor while actions run and the notifier mid-run, and checks
// that the receiver got every expected notice at least once, each copy
// with its key, duplicates only for what was in flight at the notifier's
// kill (at most one message per consumer: the route's two).
func TestNotifyAcrossKills(t *testing.T) {
	start := time.Now()
	phase := func(format string, args ...any) {
		t.Logf("%6.2fs %s", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	pw := natsauth.Credentials{}
	for _, r := range natsauth.Roles {
		pw[r] = "pw-" + string(r) + "-0123456789abcdef"
	}
	natsAddr := freeAddr(t)
	srv, err := natsserver.Start(natsserver.Options{DataDir: t.TempDir(), Listen: natsAddr,
		Users: pw.Users(natsauth.Names{NotifyRoutes: []string{"ops"}})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	url := "nats://" + natsAddr
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const leaseTTL = 3 * time.Second
	bc := bus.DefaultConfig()
	bc.URLs, bc.User, bc.Password, bc.Name, bc.Logger = url, "admin", pw[natsauth.Admin], "test-admin", zerolog.Nop()
	admin, err := bus.Connect(ctx, bc)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.LeaseStore(ctx, leaseTTL, 1); err != nil {
		t.Fatal(err)
	}
	if err := admin.Checkpoints().Open(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.LimitsStore(ctx, 1); err != nil {
		t.Fatal(err)
	}

	simAddr := freeAddr(t)
	startProc(t, "sim", "sim", "--listen", simAddr, "--nodes", "3", "--guests", "14", "--task-latency", "700ms",
		"--token", "root@pam!n=notify-secret")
	var guests []pvesim.GuestInfo
	eventually(t, 30*time.Second, "the simulator", func() bool {
		res, err := http.Get("http://" + simAddr + "/_sim/guests")
		if err != nil {
			return false
		}
		defer res.Body.Close()
		return json.NewDecoder(res.Body).Decode(&guests) == nil
	})
	var running, stopped []int
	for _, g := range guests {
		switch {
		case g.Template:
		case g.Status == "running":
			running = append(running, g.VMID)
		default:
			stopped = append(stopped, g.VMID)
		}
	}
	if len(running) < 7 || len(stopped) < 3 {
		t.Fatalf("simulator: %d running, %d stopped guests; want 7 and 3", len(running), len(stopped))
	}
	g1, g3, g4, g2 := running[:2], running[2:4], running[4:7], stopped[:3]

	pveArgs := []string{"--pve-url", "http://" + simAddr, "--pve-token-id", "root@pam!n", "--pve-token-secret-file", writeFile(t, "pve-secret", "notify-secret")}
	as := func(role natsauth.Role) []string { return []string{"CONVERGE_NATS_PASSWORD=" + pw[role]} }
	natsArgs := func(role natsauth.Role) []string { return []string{"--nats", url, "--nats-user", string(role)} }
	roleHTTP := map[string]string{"observer": freeAddr(t), "planner": freeAddr(t)}
	startExe(t, "observer", converge, as(natsauth.Observer), slices.Concat([]string{"observer", "--http", roleHTTP["observer"], "--observe-interval", "200ms"},
		natsArgs(natsauth.Observer), pveArgs)...)
	startExe(t, "planner", converge, as(natsauth.Planner), slices.Concat([]string{"planner", "--http", roleHTTP["planner"], "--observe-interval", "200ms",
		"--lease-ttl", leaseTTL.String(), "--guard-min", "1", "--guard-share", "0.01"}, natsArgs(natsauth.Planner))...)
	startExecutor := func(name string) *proc {
		addr := freeAddr(t)
		p := startExe(t, name, converge, as(natsauth.Executor), slices.Concat([]string{"executor", "--http", addr, "--ack-wait", "3s",
			"--lease-ttl", leaseTTL.String(), "--name", name}, natsArgs(natsauth.Executor), pveArgs)...)
		p.ready(t, 60*time.Second, "http://"+addr+"/readyz")
		return p
	}
	for _, addr := range roleHTTP {
		eventually(t, 60*time.Second, addr+" ready", func() bool {
			res, err := http.Get("http://" + addr + "/readyz")
			if err != nil {
				return false
			}
			res.Body.Close()
			return res.StatusCode == 200
		})
	}
	exec1 := startExecutor("exec1")
	lkv, err := admin.JS.KeyValue(ctx, "converge_leases")
	if err != nil {
		t.Fatal(err)
	}
	var member string
	eventually(t, 60*time.Second, "exec1 holding every partition", func() bool {
		owners := leaseOwners(ctx, lkv)
		member = ""
		for _, m := range owners {
			member = m
		}
		return len(owners) == bus.DefaultPartitions
	})
	phase("roles ready; executor member %s", member)

	rcv := &hookReceiver{count: map[string]int{}, held: make(chan string, 1), release: make(chan struct{})}
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(rcv.release) }) }
	defer release()
	hook := httptest.NewServer(rcv)
	defer hook.Close()
	cfg := writeFile(t, "notify.yaml", fmt.Sprintf(`
poll: 500ms
condition_grace: 1s
routes:
- name: ops
  url: %s
  format: json
  headers: {Authorization: {env: OPS_TOKEN}}
  retry: {max: 3, initial: 100ms, max_interval: 500ms}
  timeout: 5s
`, hook.URL))
	notifyHTTP := freeAddr(t)
	startNotify := func(name string) *proc {
		env := append(as(natsauth.Notify), "OPS_TOKEN=Bearer ops")
		p := startExe(t, name, converge, env, slices.Concat([]string{"notify", "--notify-config", cfg, "--notify-ack-wait", "3s",
			"--http", notifyHTTP}, natsArgs(natsauth.Notify))...)
		p.ready(t, 30*time.Second, "http://"+notifyHTTP+"/healthz")
		return p
	}
	notifier := startNotify("notify1")
	nkv := waitBucket(t, ctx, admin.JS, notify.Bucket)
	// The poller has seen exec1 with its partitions: their loss can be told.
	eventually(t, 30*time.Second, "the notifier's poll of exec1's partitions", func() bool {
		var rec struct{ Executors map[string][]int }
		e, err := nkv.Get(ctx, "poll.pve")
		return err == nil && jsonv1.Unmarshal(e.Value(), &rec) == nil && len(rec.Executors[member]) == bus.DefaultPartitions
	})

	publish := func(vmid int, body string) uint64 {
		t.Helper()
		ack, err := admin.JS.Publish(ctx, "pve.desired.pve."+strconv.Itoa(vmid), []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	var expected []string
	converged := func(vmid int, rev uint64) string { return fmt.Sprintf("pve/%d/converged/%d", vmid, rev) }
	vkv, err := admin.JS.KeyValue(ctx, bus.DefaultBucket)
	if err != nil {
		t.Fatal(err)
	}
	summary := func(vmid int) views.Summary {
		e, err := vkv.Get(ctx, views.GuestKey("pve", vmid))
		if err != nil {
			return views.Summary{}
		}
		var d views.GuestDoc
		if jsonv1.Unmarshal(e.Value(), &d) != nil || d.View == nil {
			return views.Summary{}
		}
		return views.Summarise(&d)
	}

	// 1: a change converges.
	var keys []string
	for _, v := range g1 {
		keys = append(keys, converged(v, publish(v, fmt.Sprintf(`{"vmid":%d,"tags":["phase1"]}`, v))))
	}
	eventually(t, 60*time.Second, "phase 1 notices", func() bool { return rcv.has(keys...) })
	expected = append(expected, keys...)
	phase("1: %d converged notices", len(keys))

	// 2: the executor is killed while it starts guests: it is lost with
	// its partitions, no executor runs until the next starts; then the
	// starts converge.
	keys = nil
	for _, v := range g2 {
		keys = append(keys, converged(v, publish(v, fmt.Sprintf(`{"vmid":%d,"power":"running"}`, v))))
	}
	eventually(t, 30*time.Second, "an action in flight", func() bool {
		for _, v := range g2 {
			if summary(v).State == planner.Acting {
				return true
			}
		}
		return false
	})
	exec1.kill()
	lost := []string{"pve/executor/" + member + "/lost/1", "pve/role/no-executor/1"}
	for p := range bus.DefaultPartitions {
		lost = append(lost, fmt.Sprintf("pve/partition/%d/lost/%s/1", p, member))
	}
	eventually(t, 60*time.Second, "executor, partitions lost and no executor notified", func() bool { return rcv.has(lost...) })
	phase("2: exec1 SIGKILLed while acting; %d lost/not-ready notices", len(lost))
	startExecutor("exec2")
	eventually(t, 90*time.Second, "phase 2 notices", func() bool { return rcv.has(keys...) })
	expected = append(expected, append(keys, lost...)...)
	phase("2: exec2 took over; %d converged notices", len(keys))

	// 3: the notifier is killed while a delivery is in flight (the
	// receiver took it and has not answered), the changes converge
	// meanwhile, and the restarted notifier tells them: the one in flight
	// again.
	keys = nil
	rcv.mu.Lock()
	rcv.holdFor = map[string]bool{}
	rcv.mu.Unlock()
	for _, v := range g3 {
		k := converged(v, publish(v, fmt.Sprintf(`{"vmid":%d,"tags":["phase3"]}`, v)))
		keys = append(keys, k)
		rcv.mu.Lock()
		rcv.holdFor[k] = true
		rcv.mu.Unlock()
	}
	var inFlight string
	select {
	case inFlight = <-rcv.held:
	case <-time.After(60 * time.Second): // a bound, not a measurement
		t.Fatal("no phase 3 delivery reached the receiver")
	}
	notifier.kill()
	release()
	eventually(t, 60*time.Second, "phase 3 converged in the views", func() bool {
		for _, v := range g3 {
			if summary(v).State != planner.Converged {
				return false
			}
		}
		return true
	})
	startNotify("notify2")
	eventually(t, 60*time.Second, "phase 3 notices", func() bool { return rcv.has(keys...) })
	expected = append(expected, keys...)
	phase("3: notifier SIGKILLed while delivering %s, restarted; %d converged notices", inFlight, len(keys))

	// 4: stops beyond the mass-change guard are held (one goes through).
	revs := map[int]uint64{}
	for _, v := range g4 {
		revs[v] = publish(v, fmt.Sprintf(`{"vmid":%d,"power":"stopped"}`, v))
	}
	keys = nil
	held := 0
	eventually(t, 60*time.Second, "phase 4 settled in the views", func() bool {
		keys, held = keys[:0], 0
		for _, v := range g4 {
			s := summary(v)
			switch {
			case s.State == planner.Converged && s.Revision == revs[v]:
				keys = append(keys, converged(v, revs[v]))
			case s.AwaitsApproval == planner.AwaitsGuard && s.Revision == revs[v]:
				// The key names the hold action when the notifier read a
				// document that had it folded, and only the revision when
				// it read the one written as the guard decided (the hold
				// not yet journalled): either is this revision's notice.
				keys, held = append(keys, fmt.Sprintf("pve/%d/held/%d", v, revs[v])), held+1
			default:
				return false
			}
		}
		return held > 0
	})
	eventually(t, 60*time.Second, "phase 4 notices", func() bool {
		for i, k := range keys {
			if strings.Contains(k, "/held/") {
				got := rcv.received(k)
				if got == "" {
					return false
				}
				keys[i] = got
			}
		}
		return rcv.has(keys...)
	})
	expected = append(expected, keys...)
	phase("4: %d notices, %d of them held by the guard", len(keys), held)

	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	var dups, others []string
	copies := 0
	for k, n := range rcv.count {
		copies += n
		if strings.HasPrefix(k, "BAD:") {
			t.Errorf("a copy without its key: %s", k)
		}
		if n > 1 {
			dups = append(dups, fmt.Sprintf("%s ×%d", k, n))
		}
		if !slices.Contains(expected, k) {
			others = append(others, k)
		}
	}
	sort.Strings(dups)
	sort.Strings(others)
	t.Logf("%d expected notices, all received; %d copies of %d keys; duplicates: %d %v; other notices: %v",
		len(expected), copies, len(rcv.count), len(dups), dups, others)
	// Duplicates only for what the killed notifier held: the delivery in
	// flight (sent again after the restart), and at most one more message,
	// that of its route's other consumer (the bucket's notices).
	if rcv.count[inFlight] != 2 {
		t.Errorf("the notice in flight at the kill, %s, came %d times; want 2 (taken, then sent again)", inFlight, rcv.count[inFlight])
	}
	extra := 0
	for k, n := range rcv.count {
		if k != inFlight {
			extra += n - 1
		}
	}
	if extra > 1 {
		t.Fatalf("%d duplicate copies besides the one in flight; at most 1 more can have been held at the notifier's kill", extra)
	}
}
