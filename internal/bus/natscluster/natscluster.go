package natscluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Name is the cluster name every node is started with.
const Name = "converge-test"

// Cluster is n nats-node processes forming one JetStream cluster.
type Cluster struct {
	t     testing.TB
	exe   string
	args  []string
	nodes []*node
}

type node struct {
	name, store, client, route, logPath string

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{} // closed when cmd has exited
	killed bool          // by Kill or Stop: WaitReady leaves it out
}

// Start launches n nodes and returns without waiting for them (see
// WaitReady). Each node runs `exe args... nats-node FLAGS`.
func Start(t testing.TB, n int, exe string, args ...string) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("natscluster: %d nodes", n)
	}
	dir := t.TempDir()
	ports := freePorts(t, 2*n)
	c := &Cluster{t: t, exe: exe, args: args}
	for i := range n {
		name := "n" + strconv.Itoa(i)
		c.nodes = append(c.nodes, &node{name: name, store: filepath.Join(dir, name), client: ports[2*i], route: ports[2*i+1],
			logPath: filepath.Join(dir, name+".log")})
	}
	// Registered before any node starts, and after TempDir's own cleanup,
	// so the nodes are gone before their stores are removed.
	t.Cleanup(c.cleanup)
	for i := range c.nodes {
		c.start(i)
	}
	return c
}

// freePorts returns loopback ports that were free just now, all different:
// the listeners are held until every port is picked.
func freePorts(t testing.TB, n int) []string {
	t.Helper()
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	var out []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().String())
	}
	return out
}

func (c *Cluster) start(i int) {
	c.t.Helper()
	n := c.nodes[i]
	var routes []string
	for _, o := range c.nodes {
		routes = append(routes, "nats-route://"+o.route)
	}
	lf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	args := append(append([]string{}, c.args...), "nats-node", "--name", n.name, "--store", n.store, "--listen", n.client,
		"--cluster-name", Name, "--cluster-listen", n.route, "--routes", strings.Join(routes, ","))
	cmd := exec.Command(c.exe, args...)
	cmd.Env = append(os.Environ(), "CONVERGE_RUN_MAIN=1")
	dieWithParent(cmd)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		lf.Close()
		c.t.Fatalf("natscluster: start %s: %v", n.name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); lf.Close(); close(done) }()
	n.mu.Lock()
	n.cmd, n.done, n.killed = cmd, done, false
	n.mu.Unlock()
}

// running returns the node's process and exit channel, or nil if it has
// exited.
func (n *node) running() (*exec.Cmd, chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return nil, nil
	}
	select {
	case <-n.done:
		return nil, nil
	default:
		return n.cmd, n.done
	}
}

func (n *node) setKilled() {
	n.mu.Lock()
	n.killed = true
	n.mu.Unlock()
}

// Len is the number of nodes.
func (c *Cluster) Len() int { return len(c.nodes) }

// URL is node i's client URL.
func (c *Cluster) URL(i int) string { return "nats://" + c.nodes[i].client }

// ClientURLs is every node's client URL, comma-separated, in node order:
// what --nats takes.
func (c *Cluster) ClientURLs() string {
	urls := make([]string, len(c.nodes))
	for i := range c.nodes {
		urls[i] = c.URL(i)
	}
	return strings.Join(urls, ",")
}

// ServerName is node i's nats-server name, as stream and consumer infos
// name leaders and replicas.
func (c *Cluster) ServerName(i int) string { return c.nodes[i].name }

// Index is the node with the server name, or -1.
func (c *Cluster) Index(serverName string) int {
	for i, n := range c.nodes {
		if n.name == serverName {
			return i
		}
	}
	return -1
}

// Running reports whether node i's process is alive.
func (c *Cluster) Running(i int) bool {
	cmd, _ := c.nodes[i].running()
	return cmd != nil
}

// Kill SIGKILLs node i (by PID) and waits until it is gone; a node that
// is not running is left alone.
func (c *Cluster) Kill(i int) {
	c.nodes[i].setKilled()
	if cmd, done := c.nodes[i].running(); cmd != nil {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
	}
}

// Stop SIGTERMs node i and waits until it has shut down gracefully; after
// timeout it is killed.
func (c *Cluster) Stop(i int, timeout time.Duration) {
	c.nodes[i].setKilled()
	cmd, done := c.nodes[i].running()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(timeout):
		c.t.Logf("natscluster: %s did not stop within %s; killing it", c.nodes[i].name, timeout)
		c.Kill(i)
	}
}

// Restart starts node i again with its store and ports, killing it first
// if it still runs. Its ports were free while it was down; in the unlikely
// case that something else took one, the node exits and WaitReady says so.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	c.Kill(i)
	c.start(i)
}

// WaitReady waits until every node answers a JetStream account info
// request, which needs an elected meta leader reachable from that node.
// Nodes stopped by Kill or Stop (and not restarted) are left out; it fails
// at once if any other node's process has exited.
func (c *Cluster) WaitReady(ctx context.Context) error {
	pending := map[int]bool{}
	for i, n := range c.nodes {
		n.mu.Lock()
		if !n.killed {
			pending[i] = true
		}
		n.mu.Unlock()
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		for i := range pending {
			if !c.Running(i) {
				return fmt.Errorf("natscluster: %s exited:\n%s", c.nodes[i].name, c.logTail(i, 3000))
			}
			if last = c.ready(ctx, i); last == nil {
				delete(pending, i)
			}
		}
		if len(pending) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("natscluster: not ready (%d node(s) pending; last: %v): %w", len(pending), last, ctx.Err())
		case <-tick.C:
		}
	}
}

func (c *Cluster) ready(ctx context.Context, i int) error {
	nc, err := nats.Connect(c.URL(i), nats.NoReconnect(), nats.Timeout(2*time.Second))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	actx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = js.AccountInfo(actx)
	return err
}

// Log is node i's output so far (every run of it).
func (c *Cluster) Log(i int) string {
	b, err := os.ReadFile(c.nodes[i].logPath)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err.Error()
	}
	return string(b)
}

func (c *Cluster) logTail(i, n int) string {
	s := c.Log(i)
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return s
}

// cleanup kills the nodes this cluster started: the test is over and the
// stores are discarded, so a graceful shutdown buys nothing.
func (c *Cluster) cleanup() {
	for i := range c.nodes {
		c.Kill(i)
	}
	if c.t.Failed() || os.Getenv("CONVERGE_TEST_LOGS") != "" {
		for i, n := range c.nodes {
			c.t.Logf("--- nats node %s log ---\n%s", n.name, c.logTail(i, 6000))
		}
	}
}
