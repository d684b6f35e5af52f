package events_test

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/converge-pve/converge/events"
)

// TestDecodedEventsKeepNoBody: a value from Decode shares no memory with
// the decoder's copy of the body. Keeping one short string of each of a
// thousand decoded results (whose bodies carry a 4 KB description) and
// their one-entry pending map must keep about those, not the bodies.
func TestDecodedEventsKeepNoBody(t *testing.T) {
	const n = 1000
	now := time.Now()
	body := func(i int) []byte {
		o := &events.Observed{Meta: events.NewMeta("executor", "", now), VMID: 100 + i, Cluster: "pve", Exists: true,
			Node: "pve1", Kind: events.QEMU, Status: "running", Digest: fmt.Sprintf("%040d", i),
			Config:  events.GuestConfig{Name: fmt.Sprintf("vm-%d", i), Description: strings.Repeat("d", 4096), Tags: []string{"a"}},
			Pending: map[string]string{"cores": "4"}, ReadAt: now, Source: events.SourceExecutor}
		b, err := json.Marshal(events.Result{Meta: events.NewMeta("executor", fmt.Sprintf("c-%d", i), now),
			ActionID: fmt.Sprintf("pve-%d-1-1", 100+i), VMID: 100 + i, Cluster: "pve", Op: events.OpSetConfig,
			Status: events.ResultSucceeded, Observed: o, TaskLog: []string{"TASK OK"}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	kept := make([]string, 0, 4*n)
	keptMaps := make([]map[string]string, 0, n)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range n {
		r, err := events.Decode[events.Result](body(i))
		if err != nil {
			t.Fatal(err)
		}
		kept = append(kept, r.ActionID, r.Observed.Digest, r.Observed.Config.Tags[0], r.TaskLog[0])
		keptMaps = append(keptMaps, r.Observed.Pending)
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	perEvent := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
	if perEvent > 3000 { // about 1.4 KB detached, over 6 KB when each body is kept
		t.Fatalf("keeping a few strings of each decoded result keeps %d B per result: the bodies (> 4 KB) are still reachable", perEvent)
	}
	runtime.KeepAlive(kept)
	runtime.KeepAlive(keptMaps)
}
