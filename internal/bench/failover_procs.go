package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/lease"
)

// execProc is one executor process of the run.
type execProc struct {
	name string // its --name; its results say "executor@"+name
	cmd  *exec.Cmd
	done chan struct{}
	// memberPrefix and memberLen are what every lease.MemberID of its
	// result name shares: the cleaned name and "-", and the length with
	// the random suffix (memberOf).
	memberPrefix string
	memberLen    int
}

// resultName is the executor's name in its results (app names each role
// "<role>@<process name>").
func (p *execProc) resultName() string { return "executor@" + p.name }

// startExecutor starts `converge executor` as its own process, its output
// in <dir>/<name>.log.
func startExecutor(o FailoverOptions, dir, name, natsURL, pveURL string) (*execProc, error) {
	lf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	args := append(append([]string(nil), o.ExecutorCommand[1:]...),
		"--nats", natsURL, "--pve-url", pveURL, "--pve-token-id", tokenID, "--pve-token-secret", tokenSecret,
		"--name", name, "--lease-ttl", o.LeaseTTL.String(), "--ack-wait", o.AckWait.String(), "--http", "")
	cmd := exec.Command(o.ExecutorCommand[0], args...)
	// Warnings only: the logs are for a post-mortem, not the table.
	cmd.Env = append(os.Environ(), "CONVERGE_LOG_LEVEL=warn")
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("bench: start executor %s: %w", name, err)
	}
	p := &execProc{name: name, cmd: cmd, done: make(chan struct{})}
	id := lease.MemberID(p.resultName())
	p.memberPrefix, p.memberLen = id[:len(id)-8], len(id)
	go func() { _ = cmd.Wait(); lf.Close(); close(p.done) }()
	return p, nil
}

// kill SIGKILLs the process (by its PID: only what the bench started)
// and waits for it to be gone.
func (p *execProc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// pause stops the process (SIGSTOP) for d, calls before, then lets it go
// on (SIGCONT).
func (p *execProc) pause(ctx context.Context, d time.Duration, before func()) error {
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	err := sleepCtx(ctx, d)
	before()
	if cerr := p.cmd.Process.Signal(syscall.SIGCONT); cerr != nil {
		return cerr
	}
	return err
}

// stop asks the process to end (SIGTERM) and waits, killing it after
// timeout.
func (p *execProc) stop(timeout time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.kill()
	}
}

// exited says whether the process has ended.
func (p *execProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// leaseOwners reads the executor group's partition leases: the member
// holding each partition. A member id is lease.MemberID of the
// executor's result name: that name, cleaned, and a random suffix.
func leaseOwners(ctx context.Context, kv jetstream.KeyValue) (map[int]string, error) {
	prefix := journal.ExecutorGroup(events.DefaultCluster) + ".p."
	l, err := kv.ListKeysFiltered(ctx, prefix+"*")
	if err != nil {
		return nil, err
	}
	defer func() { _ = l.Stop() }()
	out := map[int]string{}
	for k := range l.Keys() {
		var p int
		if _, err := fmt.Sscanf(strings.TrimPrefix(k, prefix), "%d", &p); err != nil {
			continue
		}
		if e, err := kv.Get(ctx, k); err == nil {
			out[p] = string(e.Value())
		}
	}
	return out, nil
}

// memberOf says whether a lease holder's member id is the executor's:
// lease.MemberID appends "-" and 8 hex digits to the cleaned name.
func memberOf(member string, p *execProc) bool {
	return len(member) == p.memberLen && strings.HasPrefix(member, p.memberPrefix)
}
