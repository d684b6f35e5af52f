package app_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/app"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/natsserver"
	"github.com/converge-pve/converge/internal/notify"
	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/internal/pvesim/pvesimtest"
)

// The notifier beside every role (`converge up --notify-config`): a
// desired change converges and a rejected desired event is told, each
// with the key of its cause, and the route's series are on the process's
// /metrics.
func TestNotifierBesideRoles(t *testing.T) {
	var mu sync.Mutex
	got := map[string]int{}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got[r.Header.Get("X-Converge-Key")]++
		mu.Unlock()
	}))
	defer hook.Close()
	nc, err := notify.Parse(fmt.Appendf(nil, "routes:\n- name: hook\n  url: %s\n  triggers: [converged, rejected]\n", hook.URL))
	if err != nil {
		t.Fatal(err)
	}
	sim := pvesimtest.Start(t, pvesim.Options{Nodes: 1, Guests: 4})
	ctx, cancel := context.WithCancel(context.Background())
	cfg := app.DefaultConfig()
	cfg.Roles, cfg.Embedded = app.All, &natsserver.Options{DataDir: t.TempDir(), Listen: "127.0.0.1:-1"}
	cfg.Proxmox, cfg.HTTP, cfg.Logger = pvesimtest.Client(t, sim), "127.0.0.1:0", zerolog.Nop()
	cfg.Observer.Interval = 200 * time.Millisecond
	cfg.Notify = &nc
	a, err := app.Start(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = a.Wait() })
	waitReady(t, a)
	tctx := pvesimtest.Context(t)
	inv, err := pvesimtest.Client(t, sim).Inventory(tctx)
	if err != nil {
		t.Fatal(err)
	}
	vmid := 0
	for _, r := range inv {
		if r.Kind == pve.KindQEMU && !r.Template {
			vmid = r.VMID
			break
		}
	}
	desire := func(body string) uint64 {
		t.Helper()
		m, err := events.DesiredMessage(&events.Desired{VMID: vmid}, events.PublishOptions{Publisher: "test"})
		if err != nil {
			t.Fatal(err)
		}
		m.Data = []byte(body) // raw: the rejected one must reach the journal too
		ack, err := a.Bus().Append(tctx, m, journal.Expect{})
		if err != nil {
			t.Fatal(err)
		}
		return ack.Seq
	}
	id := strconv.Itoa(vmid)
	rev := desire(`{"vmid":` + id + `,"description":"told"}`)
	want := fmt.Sprintf("pve/%d/converged/%d", vmid, rev)
	has := func(k string) bool { mu.Lock(); defer mu.Unlock(); return got[k] > 0 }
	if !until(60*time.Second, func() bool { return has(want) }) {
		t.Fatalf("never told %s; got %v", want, got)
	}
	bad := desire(`{"vmid":` + id + `,"cores":"many"}`)
	want = fmt.Sprintf("pve/%d/rejected/%d", vmid, bad)
	if !until(60*time.Second, func() bool { return has(want) }) {
		t.Fatalf("never told %s; got %v", want, got)
	}
	m := scrapeMetrics(t, "http://"+a.HTTPAddr()+"/metrics")
	if v := sumWhere(m, "converge_notify_sent_total", map[string]string{"route": "hook"}); v < 2 {
		t.Fatalf("converge_notify_sent_total{route=hook} = %v, want ≥ 2", v)
	}
}
