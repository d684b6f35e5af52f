package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/internal/pvesim"
)

// simulator is the Proxmox the bench drives: in the bench's process, or in
// a process of its own (Options.SimCommand), as a real Proxmox would be.
type simulator interface {
	URL() string
	// Calls is the number of API calls the simulator has received.
	Calls(ctx context.Context) (int64, error)
	// CPU is the CPU time of the simulator's own process; 0 in-process,
	// where it is part of the bench's.
	CPU() time.Duration
	Close() error
}

// inProcess is the simulator in the bench's process.
type inProcess struct{ *pvesim.Sim }

func (s inProcess) Calls(context.Context) (int64, error) { return s.Sim.Calls(), nil }
func (s inProcess) CPU() time.Duration                   { return 0 }

// simArgs are what the bench asks of the simulator, as `converge sim` flags.
func simArgs(o Options) []string {
	return []string{"--listen", "127.0.0.1:0", "--nodes", "3", "--guests", strconv.Itoa(o.Guests), "--templates=false",
		"--token", tokenID + "=" + tokenSecret, "--task-latency", o.TaskLatency.String(), "--resources-lag", o.ResourcesLag.String(),
		"--mutation-log", "-", "-o", "json", "--log-level", "warn"}
}

// external is the simulator run as `converge sim` in a child process. Its
// standard output carries its address, then one line per mutation
// (--mutation-log -), from which the latency run takes its end times.
type external struct {
	cmd     *exec.Cmd
	url     string
	control string
	hc      *http.Client
	exited  chan struct{}
	waitErr error // once exited is closed
	closing atomic.Bool
}

// startExternal starts the simulator command; onMutation receives each
// mutation's guest and unix time in ns. If the process ends before Close,
// fail is called with the reason.
func startExternal(ctx context.Context, argv []string, o Options, log zerolog.Logger,
	onMutation func(vmid int, atUnixNs int64), fail context.CancelCauseFunc) (*external, error) {
	return startSimProcess(ctx, append(append([]string{}, argv...), simArgs(o)...), log, onMutation, fail)
}

// startSimProcess is startExternal with the whole command line given (the
// estate profile's own flags).
func startSimProcess(ctx context.Context, argv []string, log zerolog.Logger,
	onMutation func(vmid int, atUnixNs int64), fail context.CancelCauseFunc) (*external, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = childAttr()
	cmd.Stderr = log // its own warnings, as they come
	// An own pipe, not StdoutPipe: Wait would close that under the reader
	// and lose the lines still in it.
	out, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = w
	err = cmd.Start()
	w.Close()
	if err != nil {
		out.Close()
		return nil, fmt.Errorf("bench: start the simulator (%s): %w", strings.Join(argv, " "), err)
	}
	s := &external{cmd: cmd, exited: make(chan struct{}), hc: &http.Client{Timeout: 30 * time.Second}}
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
		if !s.closing.Load() {
			fail(fmt.Errorf("bench: the simulator exited during the run: %v", s.waitErr))
		}
	}()
	rd := bufio.NewReaderSize(out, 64<<10)
	addr := make(chan error, 1)
	go func() {
		defer out.Close()
		line, err := rd.ReadBytes('\n')
		if err == nil {
			var info struct {
				URL        string `json:"url"`
				ControlURL string `json:"control_url"`
			}
			if err = json.Unmarshal(line, &info); err == nil && (info.URL == "" || info.ControlURL == "") {
				err = fmt.Errorf("no address in %q", line)
			}
			s.url, s.control = info.URL, info.ControlURL
		}
		addr <- err
		if err != nil {
			return
		}
		for {
			line, err := rd.ReadSlice('\n')
			if err != nil {
				if !errors.Is(err, io.EOF) {
					log.Warn().Err(err).Msg("simulator's mutation log")
				}
				return
			}
			var m struct {
				AtUnixNs int64 `json:"at_unix_ns"`
				VMID     int   `json:"vmid"`
			}
			if err := json.Unmarshal(line, &m); err != nil {
				log.Warn().Err(err).Bytes("line", line).Msg("simulator's mutation log")
				continue
			}
			onMutation(m.VMID, m.AtUnixNs)
		}
	}()
	// A simulator that exits closes its output: the reader reports that.
	select {
	case err = <-addr:
	case <-ctx.Done():
		err = context.Cause(ctx)
	}
	if err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("bench: the simulator's address: %w (exit: %v)", err, s.waitErr)
	}
	return s, nil
}

func (s *external) URL() string { return s.url }

func (s *external) Calls(ctx context.Context) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.control+"/stats", nil)
	if err != nil {
		return 0, err
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("bench: the simulator's call count: %w", err)
	}
	defer resp.Body.Close()
	var st struct {
		Calls int64 `json:"calls"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return 0, fmt.Errorf("bench: the simulator's call count: %w", err)
	}
	return st.Calls, nil
}

func (s *external) CPU() time.Duration { return procCPU(s.cmd.Process.Pid) }

// Close interrupts the simulator and waits for it; it is killed if it has
// not stopped within 10 s.
func (s *external) Close() error {
	s.closing.Store(true)
	select {
	case <-s.exited:
		return nil
	default:
	}
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	return nil
}

// procCPU is the CPU time (user and system) of a running process, from
// /proc/PID/stat; 0 where that is unreadable.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the command name, which may hold spaces: state is the
	// first, utime the 12th and stime the 13th, in clock ticks (USER_HZ,
	// 100 on Linux).
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(ut+st) * 10 * time.Millisecond
}
