package bench

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	proxmox "github.com/luthermonson/go-proxmox"
)

// The baseline is the Proxmox profile's work done as a Terraform provider
// does it, here written with go-proxmox (it stands for a client converge
// is compared with; converge's own Proxmox calls go through internal/pve).
// terraform apply walks the guests BaselineParallelism at a time (its
// -parallelism, 10 by default), and for each one, as bpg's provider
// (bpg/terraform-provider-proxmox, proxmox/nodes/vms/vms.go) does:
//
//  1. writes the config with the synchronous PUT …/config (UpdateVM), which
//     Proxmox answers once the qmconfig worker it runs inline is done;
//  2. starts the guest (POST …/status/start) and polls the task's status
//     at once and then every BaselinePoll (tasks.WaitForTask: a fixed 1 s)
//     until it has stopped, failing unless it ended OK;
//  3. reads the guest back, as the resource's Read does after an apply:
//     GET …/config and GET …/status/current.
//
// The plan's refresh of every guest before the apply is not counted,
// just as converge's first observation of every guest is not.
func runBaseline(ctx context.Context, o ProxmoxOptions, rep *ProxmoxReport) error {
	sim, err := proxmoxSim(o, nil)
	if err != nil {
		return err
	}
	defer sim.Close()
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: o.BaselineParallelism}}
	c := proxmox.NewClient(sim.URL(), proxmox.WithHTTPClient(hc), proxmox.WithAPIToken(tokenID, tokenSecret))
	nodes := sim.NodeNames()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	work := make(chan int)
	var wg sync.WaitGroup
	var doneMu sync.Mutex
	done := 0
	t0 := time.Now()
	for w := 0; w < o.BaselineParallelism; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				vmid := 100 + i
				if err := applyGuest(ctx, c, nodes[i%len(nodes)], vmid, o.BaselinePoll); err != nil {
					cancel(fmt.Errorf("bench: baseline, guest %d: %w", vmid, err))
					return
				}
				doneMu.Lock()
				done++
				o.Progress("baseline", done, o.Guests)
				doneMu.Unlock()
			}
		}()
	}
feed:
	for i := 0; i < o.Guests; i++ {
		select {
		case work <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return err
	}
	rep.BaselineMakespanS = time.Since(t0).Seconds()
	rep.BaselinePveCalls = sim.Calls()
	rep.BaselineTasks = len(sim.Tasks())
	return checkDone(sim, o.Guests, "the baseline")
}

// applyGuest is one guest's apply, as the provider makes it.
func applyGuest(ctx context.Context, c *proxmox.Client, node string, vmid int, poll time.Duration) error {
	path := "/nodes/" + node + "/qemu/" + strconv.Itoa(vmid)
	body := map[string]any{"cores": proxmoxCores, "description": proxmoxDescription}
	if err := c.Put(ctx, path+"/config", body, nil); err != nil {
		return fmt.Errorf("update config: %w", err)
	}
	var upid string
	if err := c.Post(ctx, path+"/status/start", nil, &upid); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	for {
		t := proxmox.NewTask(proxmox.UPID(upid), c) // fresh: Ping decodes into it
		if err := t.Ping(ctx); err != nil {
			return fmt.Errorf("task status: %w", err)
		}
		if t.IsCompleted {
			if t.ExitStatus != "OK" {
				return fmt.Errorf("task %s ended %q", upid, t.ExitStatus)
			}
			break
		}
		tm := time.NewTimer(poll)
		select {
		case <-tm.C:
		case <-ctx.Done():
			tm.Stop()
			return context.Cause(ctx)
		}
	}
	var cfg, status map[string]any
	if err := c.Get(ctx, path+"/config", &cfg); err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	if err := c.Get(ctx, path+"/status/current", &status); err != nil {
		return fmt.Errorf("read status: %w", err)
	}
	return nil
}
