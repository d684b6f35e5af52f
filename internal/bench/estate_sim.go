package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/internal/pvesim"
)

// estateSim is the estate's simulator: `converge sim` in a process of its
// own (EstateOptions.SimCommand), or in the bench's process (tests). The
// bench drives both the same way, through the API and /_sim only.
type estateSim struct {
	url, control string
	hc           *http.Client
	ext          *external   // its own process
	in           *pvesim.Sim // in-process
}

// startEstateSim starts a simulator with the estate's nodes, no guests
// and no latency yet (the setup is not timed; setLatencies comes before
// the timed window).
func startEstateSim(ctx context.Context, o EstateOptions, fail context.CancelCauseFunc) (*estateSim, error) {
	s := &estateSim{hc: &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: estateSetupWorkers}}}
	if len(o.SimCommand) == 0 {
		sim, err := pvesim.New(pvesim.Options{Nodes: o.Nodes, Tokens: map[string]string{tokenID: tokenSecret}, Seed: 1,
			Faults: pvesim.Faults{ResourcesLag: pvesim.Duration(o.ResourcesLag)}})
		if err != nil {
			return nil, err
		}
		if err := sim.Start("127.0.0.1:0"); err != nil {
			return nil, err
		}
		s.in, s.url, s.control = sim, sim.URL(), sim.ControlURL()
		return s, nil
	}
	argv := append(append([]string{}, o.SimCommand...), "--listen", "127.0.0.1:0", "--nodes", strconv.Itoa(o.Nodes),
		"--guests", "0", "--templates=false", "--token", tokenID+"="+tokenSecret, "--resources-lag", o.ResourcesLag.String(),
		"-o", "json", "--log-level", "warn")
	ext, err := startSimProcess(ctx, argv, o.Logger.Level(zerolog.WarnLevel), func(int, int64) {}, fail)
	if err != nil {
		return nil, err
	}
	s.ext, s.url, s.control = ext, ext.URL(), ext.control
	return s, nil
}

func (s *estateSim) close() {
	if s.ext != nil {
		_ = s.ext.Close()
	}
	if s.in != nil {
		_ = s.in.Close()
	}
}

// cpu is the simulator process's CPU time; 0 in-process.
func (s *estateSim) cpu() time.Duration {
	if s.ext != nil {
		return s.ext.CPU()
	}
	return 0
}

// do sends one request; into, if set, receives the answer's JSON (the
// API's "data" member for API paths).
func (s *estateSim) do(ctx context.Context, method, u, contentType string, body []byte, into any) error {
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Authorization", "PVEAPIToken="+tokenID+"="+tokenSecret)
	resp, err := s.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, u, resp.Status, bytes.TrimSpace(b))
	}
	if into == nil {
		return nil
	}
	if strings.HasPrefix(u, s.url) {
		env := struct {
			Data any `json:"data"`
		}{Data: into}
		return json.Unmarshal(b, &env)
	}
	return json.Unmarshal(b, into)
}

// estateSetupWorkers create the guests in parallel.
const estateSetupWorkers = 16

// createGuests creates the estate's guests through the API, as an
// operator's provisioning would (POST /nodes/{node}/qemu): QEMU, stopped,
// one core, guest 100+i on the i-th node (mod nodes) by name.
func (s *estateSim) createGuests(ctx context.Context, o EstateOptions) ([]string, error) {
	var nodes []struct {
		Node string `json:"node"`
	}
	if err := s.do(ctx, http.MethodGet, s.url+"/nodes", "", nil, &nodes); err != nil {
		return nil, fmt.Errorf("bench: the simulator's nodes: %w", err)
	}
	names := make([]string, 0, len(nodes))
	for _, n := range nodes {
		names = append(names, n.Node)
	}
	sort.Strings(names)
	if len(names) != o.Nodes {
		return nil, fmt.Errorf("bench: the simulator has %d nodes, want %d", len(names), o.Nodes)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	work := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	for range estateSetupWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				vmid := 100 + i
				form := url.Values{"vmid": {strconv.Itoa(vmid)}, "name": {fmt.Sprintf("vm-%d", vmid)}, "cores": {"1"}, "memory": {"1024"}}
				err := s.do(ctx, http.MethodPost, s.url+"/nodes/"+names[i%len(names)]+"/qemu", "application/x-www-form-urlencoded",
					[]byte(form.Encode()), nil)
				if err != nil {
					cancel(fmt.Errorf("bench: create guest %d: %w", vmid, err))
					return
				}
				mu.Lock()
				done++
				o.Progress("creating guests", done, o.Guests)
				mu.Unlock()
			}
		}()
	}
feed:
	for i := range o.Guests {
		select {
		case work <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	return names, context.Cause(ctx)
}

// setLatencies puts the profile's call and task latencies in force.
func (s *estateSim) setLatencies(ctx context.Context, o EstateOptions) error {
	power, cfg := o.PowerTask.String(), o.ConfigTask.String()
	b, err := json.Marshal(map[string]any{"latency": o.APILatency.String(), "task_latency_by_type": map[string]string{
		"qmstart": power, "qmstop": power, "qmshutdown": power, "qmreboot": power, "qmconfig": cfg}})
	if err != nil {
		return err
	}
	if err := s.do(ctx, http.MethodPatch, s.control+"/faults", "application/json", b, nil); err != nil {
		return fmt.Errorf("bench: set the simulator's latencies: %w", err)
	}
	return nil
}

// simStats are the simulator's counters (GET /_sim/stats).
type simStats struct {
	Calls     int64 `json:"calls"`
	Mutations int64 `json:"mutations"`
	Tasks     int   `json:"tasks"`
}

func (s *estateSim) stats(ctx context.Context) (simStats, error) {
	var st simStats
	if err := s.do(ctx, http.MethodGet, s.control+"/stats", "", nil, &st); err != nil {
		return st, fmt.Errorf("bench: the simulator's stats: %w", err)
	}
	return st, nil
}

// checkDone verifies, from the simulator, that every guest runs with the
// desired config.
func (s *estateSim) checkDone(ctx context.Context, guests int) error {
	var gs []pvesim.GuestInfo
	if err := s.do(ctx, http.MethodGet, s.control+"/guests", "", nil, &gs); err != nil {
		return fmt.Errorf("bench: the simulator's guests: %w", err)
	}
	ok := 0
	var first string
	for _, g := range gs {
		if g.VMID < 100 || g.VMID >= 100+guests {
			continue
		}
		if g.Status == "running" && g.Config["cores"] == strconv.Itoa(proxmoxCores) && len(g.Pending) == 0 &&
			g.Config["description"] == proxmoxDescription {
			ok++
		} else if first == "" {
			first = fmt.Sprintf("%d: %s, config %v, pending %v", g.VMID, g.Status, g.Config, g.Pending)
		}
	}
	if ok != guests {
		return fmt.Errorf("bench: after converge's run %d of %d guests are not running with the new config (first %s)", guests-ok, guests, first)
	}
	return nil
}
