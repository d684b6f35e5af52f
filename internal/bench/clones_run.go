package bench

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/app"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/natsserver"
	"github.com/converge-pve/converge/internal/pve"
	"github.com/converge-pve/converge/internal/pvesim"
)

// The templates: two QEMU (9000, 9002) and two container (9001, 9003)
// ones, spread over the storages and nodes.
var cloneTemplates = []struct {
	vmid int
	lxc  bool
}{{9000, false}, {9001, true}, {9002, false}, {9003, true}}

// cloneSpec is guest i's clone: QEMU for even i, a container for odd;
// from the kind's first or second template (tpl, its index in
// cloneTemplates); full (onto the storages in turn) or linked (on its
// template's storage) every other pair.
func cloneSpec(i int, storages []string) (tpl int, lxc, full bool, storage string) {
	lxc = i%2 == 1
	tpl = (i/2)%2*2 + i%2
	full = (i/4)%2 == 0
	if full {
		storage = storages[(i/8)%len(storages)]
	}
	return tpl, lxc, full, storage
}

// templateStorage is where template k's disk lives.
func templateStorage(k int, storages []string) string { return storages[k%len(storages)] }

func runClones(ctx context.Context, o ClonesOptions, dir string, rep *ClonesReport) error {
	sim, err := pvesim.New(pvesim.Options{Nodes: o.Nodes, Tokens: map[string]string{tokenID: tokenSecret}, Seed: 1,
		Faults: pvesim.Faults{Latency: pvesim.Duration(o.APILatency), StorageLockHold: pvesim.Duration(o.LockHold), TaskLatencyByType: map[string]pvesim.Duration{
			"qmclone": pvesim.Duration(o.QEMUClone), "vzclone": pvesim.Duration(o.LXCClone), "qmconfig": pvesim.Duration(o.ConfigWrite)}}})
	if err != nil {
		return err
	}
	defer sim.Close()
	if err := sim.Start("127.0.0.1:0"); err != nil {
		return err
	}
	nodes := sim.NodeNames()
	storages, shared, err := cloneStorages(ctx, sim.URL(), nodes[0])
	if err != nil {
		return err
	}
	if len(storages) > o.Storages {
		storages = storages[:o.Storages]
	}
	rep.Storages = storages
	rep.LockModelled = o.LockHold > 0
	for k, t := range cloneTemplates {
		spec := pvesim.GuestSpec{VMID: t.vmid, Node: nodes[k%len(nodes)], Name: fmt.Sprintf("tpl-%d", t.vmid), Template: true}
		st := templateStorage(k, storages)
		if t.lxc {
			spec.Kind, spec.Config = pvesim.LXC, map[string]string{"rootfs": fmt.Sprintf("%s:base-%d-disk-0,size=8G", st, t.vmid)}
		} else {
			spec.Config = map[string]string{"scsi0": fmt.Sprintf("%s:base-%d-disk-0,iothread=1,size=32G", st, t.vmid)}
		}
		if err := sim.AddGuest(spec); err != nil {
			return err
		}
	}
	ideal := CloneIdealInput{APILatency: o.APILatency, QEMUClone: o.QEMUClone, LXCClone: o.LXCClone, ConfigWrite: o.ConfigWrite, LockHold: o.LockHold, Workers: 3}
	bodies := make([]string, o.Guests)
	for i := range bodies {
		k, lxc, full, storage := cloneSpec(i, storages)
		from := cloneTemplates[k].vmid
		lock := storage
		if !full {
			lock = templateStorage(k, storages)
		}
		ideal.Clones = append(ideal.Clones, IdealClone{LXC: lxc, Template: from, Storage: lock, Node: nodes[k%len(nodes)], Shared: shared[lock]})
		rep.QEMU, rep.LXC = rep.QEMU+boolN(!lxc), rep.LXC+boolN(lxc)
		rep.Full, rep.Linked = rep.Full+boolN(full), rep.Linked+boolN(!full)
		c := `{"from":` + strconv.Itoa(from)
		if full {
			c += `,"full":true,"storage":"` + storage + `"`
		}
		bodies[i] = `{"vmid":` + strconv.Itoa(100+i) + `,"clone":` + c + `}}`
	}
	d, why := CloneIdeal(ideal)
	rep.IdealMakespanS, rep.IdealBound = d.Seconds(), why

	pc := pve.DefaultConfig()
	pc.URL, pc.TokenID, pc.TokenSecret, pc.Logger = sim.URL(), tokenID, tokenSecret, o.Logger
	px, err := pve.New(pc)
	if err != nil {
		return err
	}
	tr := &convergeTracker{convergedAt: make([]int64, o.Guests)}
	// As `converge up` assembles it (runConverge), with the profile's limits.
	cfg := app.DefaultConfig()
	cfg.Name, cfg.Roles, cfg.Embedded = "bench", app.All, &natsserver.Options{DataDir: dir, Name: "bench"}
	cfg.Proxmox, cfg.Logger = px, o.Logger
	cfg.Planner.Planner.OnDecision, cfg.Planner.Planner.Limits = tr.onDecision, o.Limits
	a, err := app.Start(context.WithoutCancel(ctx), cfg)
	if err != nil {
		return err
	}
	defer func() {
		a.Stop()
		if err := a.Wait(); err != nil {
			o.Logger.Error().Err(err).Msg("bench roles stopped")
		}
	}()
	b := a.Bus()
	// The templates in the planner's inventory first: their observations
	// journalled.
	err = waitFor(ctx, 5*time.Minute, "first observation of the templates", func() (int, int, bool) {
		seen := journalSubjects(ctx, b, events.Prefix+"."+string(events.KindObserved)+".>")
		n := 0
		for _, t := range cloneTemplates {
			// Journal subjects end with the guest's partition.
			p := events.Subject(events.KindObserved, events.DefaultCluster, t.vmid) + "."
			for subj := range seen {
				if strings.HasPrefix(subj, p) {
					n++
					break
				}
			}
		}
		o.Progress("observing templates", n, len(cloneTemplates))
		return n, len(cloneTemplates), n == len(cloneTemplates)
	})
	if err != nil {
		return err
	}
	actions0 := streamCount(ctx, b, "pve.action.>")
	calls0, tasks0 := sim.Calls(), len(sim.Tasks())
	t0 := time.Now()
	if err := publishDesired(ctx, b.JS, o.Guests, func(i int) string { return bodies[i] }); err != nil {
		return err
	}
	limit := 10*time.Minute + 4*d
	err = waitForEvery(ctx, 50*time.Millisecond, limit, "convergence of every clone", func() (int, int, bool) {
		n := int(tr.done.Load())
		o.Progress("cloning", n, o.Guests)
		return n, o.Guests, n >= o.Guests
	})
	if err != nil {
		return err
	}
	var last int64
	for i := range tr.convergedAt {
		last = max(last, atomic.LoadInt64(&tr.convergedAt[i]))
	}
	rep.MakespanS = time.Unix(0, last).Sub(t0).Seconds()
	rep.PveCalls = sim.Calls() - calls0
	rep.Actions = streamCount(ctx, b, "pve.action.>") - actions0
	tasks := sim.Tasks()[tasks0:]
	rep.Tasks = len(tasks)
	lockOf := map[string]string{}
	for i, c := range ideal.Clones {
		lockOf[strconv.Itoa(100+i)] = c.Storage
	}
	var clones []pvesim.TaskInfo
	for _, t := range tasks {
		failed := !t.Running && t.ExitStatus != "OK" && !strings.HasPrefix(t.ExitStatus, "WARNINGS")
		rep.FailedTasks += boolN(failed)
		rep.LockTimeouts += boolN(failed && isLockTimeout(t.ExitStatus))
		if t.Type == "qmclone" || t.Type == "vzclone" {
			rep.CloneTasks++
			clones = append(clones, t)
		}
	}
	rep.MaxClonesPerStorage = maxPerStorage(clones, lockOf)
	rep.CTTemplateGapMs = templateGaps(clones)
	rep.CTChain = ctChain(clones, t0, time.Unix(0, last), o.LockHold+o.LXCClone)
	for i := 0; i < o.Guests; i++ {
		if g, ok := sim.Guest(100 + i); !ok || g.Lock != "" {
			return fmt.Errorf("bench: after converge's run guest %d is missing or locked", 100+i)
		}
	}
	return nil
}

func boolN(b bool) int {
	if b {
		return 1
	}
	return 0
}

// isLockTimeout reports a task that failed waiting for a lock, in
// Proxmox's words: PVE::Tools::lock_file_full's "can't lock file '…' -
// got timeout", PVE::Cluster cfs_lock's "got lock request timeout".
func isLockTimeout(exit string) bool {
	return strings.Contains(exit, "got timeout") || strings.Contains(exit, "lock request timeout")
}

// maxPerStorage is the most clone tasks that ran at once taking one
// storage's lock; a clone task's id is its source, so the storage comes
// from the target vmid in its log's first line.
func maxPerStorage(clones []pvesim.TaskInfo, lockOf map[string]string) int {
	byStorage := make([]pvesim.TaskInfo, 0, len(clones))
	for _, t := range clones {
		st := ""
		if len(t.Log) > 0 {
			if _, id, ok := strings.Cut(t.Log[0], " with ID "); ok {
				st = lockOf[strings.TrimSpace(id)]
			}
		}
		t.Node = st // maxInFlight counts per node: here per storage
		byStorage = append(byStorage, t)
	}
	return maxInFlight(byStorage)
}

// cloneStorages are the simulator's storages that hold both VM images and
// container root disks, in its order, and which of them are shared (whose
// lock is the cluster's, not each node's).
func cloneStorages(ctx context.Context, url, node string) ([]string, map[string]bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/nodes/"+node+"/storage", nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Authorization", "PVEAPIToken="+tokenID+"="+tokenSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Data []struct {
			Storage string `json:"storage"`
			Content string `json:"content"`
			Shared  int    `json:"shared"`
		} `json:"data"`
	}
	if err := json.UnmarshalRead(resp.Body, &body); err != nil {
		return nil, nil, fmt.Errorf("bench: the simulator's storages: %w", err)
	}
	var out []string
	shared := map[string]bool{}
	for _, s := range body.Data {
		c := "," + s.Content + ","
		if strings.Contains(c, ",images,") && strings.Contains(c, ",rootdir,") {
			out = append(out, s.Storage)
			shared[s.Storage] = s.Shared == 1
		}
	}
	if len(out) == 0 {
		return nil, nil, fmt.Errorf("bench: the simulator has no storage for images and container root disks")
	}
	return out, shared, nil
}

// journalSubjects is how many messages the journal holds on each subject
// matching filter; nil when it cannot say.
func journalSubjects(ctx context.Context, b *bus.Bus, filter string) map[string]uint64 {
	s, err := b.Stream(ctx)
	if err != nil {
		return nil
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return nil
	}
	return info.State.Subjects
}

// vzcloneRuns are the container clone tasks of clones by template (the
// task's ID), each template's by start.
func vzcloneRuns(clones []pvesim.TaskInfo) map[string][]pvesim.TaskInfo {
	by := map[string][]pvesim.TaskInfo{}
	for _, t := range clones {
		if t.Type == "vzclone" {
			by[t.ID] = append(by[t.ID], t)
		}
	}
	for _, ts := range by {
		sort.Slice(ts, func(i, j int) bool { return ts[i].Start.Before(ts[j].Start) })
	}
	return by
}

// templateGaps are the times from a container template's clone task's end
// to the start of its next clone task.
func templateGaps(clones []pvesim.TaskInfo) Latency {
	var gaps []int64
	for _, ts := range vzcloneRuns(clones) {
		for k := 1; k < len(ts); k++ {
			gaps = append(gaps, int64(ts[k].Start.Sub(ts[k-1].End)))
		}
	}
	return percentiles(gaps)
}
