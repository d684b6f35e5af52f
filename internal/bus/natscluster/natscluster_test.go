package natscluster_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/bus/natscluster"
	"github.com/converge-pve/converge/internal/natsserver"
)

// TestMain lets this test binary stand in for `converge nats-node` (which
// cmd/converge cannot lend to a package below it): Start re-executes it
// with CONVERGE_RUN_MAIN=1, and it runs bus.StartEmbedded as the command
// would, until SIGTERM.
func TestMain(m *testing.M) {
	if os.Getenv("CONVERGE_RUN_MAIN") == "1" {
		if err := natsNode(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "nats-node:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func natsNode(args []string) error {
	if len(args) == 0 || args[0] != "nats-node" {
		return fmt.Errorf("want nats-node, got %q", args)
	}
	fs := flag.NewFlagSet("nats-node", flag.ContinueOnError)
	name := fs.String("name", "", "")
	store := fs.String("store", "", "")
	listen := fs.String("listen", "", "")
	cluster := fs.String("cluster-name", "", "")
	clusterListen := fs.String("cluster-listen", "", "")
	routes := fs.String("routes", "", "")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	log := zerolog.New(os.Stderr).Level(zerolog.InfoLevel).With().Timestamp().Logger()
	s, err := natsserver.Start(natsserver.Options{DataDir: *store, Listen: *listen, Name: *name, Logger: &log,
		Cluster: &natsserver.ClusterOptions{Name: *cluster, Listen: *clusterListen, Routes: strings.Split(*routes, ",")}})
	if err != nil {
		return err
	}
	<-ctx.Done()
	s.Shutdown()
	s.WaitForShutdown()
	return nil
}

func connect(t *testing.T, ctx context.Context, urls string) *bus.Bus {
	t.Helper()
	bc := bus.DefaultConfig()
	bc.URLs, bc.Name, bc.Replicas, bc.Logger = urls, t.Name(), 3, zerolog.Nop()
	b, err := bus.Connect(ctx, bc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// TestClusterProvisionR3AndLeaderLoss provisions the journal stream and
// the views bucket with three replicas on a 3-node cluster of separate
// processes, then SIGKILLs the node that leads the stream while a client
// connected only to that node publishes. The client must find the other
// nodes on its own (it learned them from the one it dialled), bus.Publish
// must ride out the leaderless seconds, and every acknowledged event must
// survive, exactly once.
func TestClusterProvisionR3AndLeaderLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-process NATS cluster")
	}
	start := time.Now()
	c := natscluster.Start(t, 3, os.Args[0])
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rctx, rcancel := context.WithTimeout(ctx, 60*time.Second)
	defer rcancel()
	if err := c.WaitReady(rctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("%5.1fs cluster ready", time.Since(start).Seconds())

	// Every role provisions at start, concurrently, on a cluster that may
	// have just formed (no deadline: like a role's context).
	admin := connect(t, ctx, c.ClientURLs())
	errs := make(chan error, 3)
	for range 3 {
		b := connect(t, ctx, c.ClientURLs())
		go func() { errs <- b.Provision(context.Background()) }()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := admin.Provision(ctx); err != nil { // idempotent
		t.Fatal(err)
	}
	s, err := admin.Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	si, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if si.Config.Replicas != 3 || si.Cluster == nil || si.Cluster.Leader == "" || len(si.Cluster.Replicas) != 2 {
		t.Fatalf("stream is not R3 with a leader: replicas %d, cluster %+v", si.Config.Replicas, si.Cluster)
	}
	kv, err := admin.Views(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ks, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r := ks.(*jetstream.KeyValueBucketStatus).StreamInfo().Config.Replicas; r != 3 {
		t.Fatalf("views bucket has %d replicas, want 3", r)
	}
	leader := c.Index(si.Cluster.Leader)
	t.Logf("%5.1fs provisioned R3; stream leader %s", time.Since(start).Seconds(), si.Cluster.Leader)

	// The publisher knows only the leader's node.
	pub := connect(t, ctx, c.URL(leader))
	const total, killAt = 200, 100
	acked := map[uint64]string{}
	var killed time.Time
	var gap time.Duration
	failures := 0
	for i := range total {
		if i == killAt {
			c.Kill(leader)
			killed = time.Now()
		}
		id := "cluster-test-" + strconv.Itoa(i)
		for {
			// Bounded like a caller's publish without a deadline (5 s).
			pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
			ack, err := pub.Publish(pctx, events.Subject(events.KindDesired, "pve", 100+i%10),
				[]byte(`{"vmid":`+strconv.Itoa(100+i%10)+`}`), nil, jetstream.WithMsgID(id))
			pcancel()
			if err == nil {
				acked[ack.Sequence] = id
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("publish %d: %v", i, err)
			}
			// Unknown whether it was stored: the retry has the same msg-id.
			failures++
		}
		if i == killAt {
			gap = time.Since(killed)
		}
	}
	t.Logf("%5.1fs %d acknowledged; failover gap %s, %d failed attempts retried; publisher now on %s",
		time.Since(start).Seconds(), len(acked), gap.Round(time.Millisecond), failures, pub.NC.ConnectedServerName())
	if len(acked) != total {
		t.Fatalf("%d distinct sequences acknowledged for %d events", len(acked), total)
	}
	if pub.NC.ConnectedServerName() == c.ServerName(leader) {
		t.Fatal("publisher still reports the killed node")
	}

	si, err = s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if si.Cluster.Leader == "" || si.Cluster.Leader == c.ServerName(leader) {
		t.Fatalf("no new stream leader: %+v", si.Cluster)
	}
	if si.State.Msgs != total {
		t.Fatalf("stream holds %d messages, want %d (retries must not duplicate)", si.State.Msgs, total)
	}
	for seq, id := range acked {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("acknowledged seq %d (%s): %v", seq, id, err)
		}
		if got := m.Header.Get(jetstream.MsgIDHeader); got != id {
			t.Fatalf("seq %d holds %q, acknowledged as %q", seq, got, id)
		}
	}

	// The killed node comes back and catches up.
	c.Restart(leader)
	if err := c.WaitReady(rctx); err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		si, err = s.Info(ctx)
		if err == nil && caughtUp(si, c.ServerName(leader)) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s did not catch up: %+v %v", c.ServerName(leader), si.Cluster, err)
		case <-tick.C:
		}
	}
	t.Logf("%5.1fs %s restarted and current", time.Since(start).Seconds(), c.ServerName(leader))
}

func caughtUp(si *jetstream.StreamInfo, name string) bool {
	if si.Cluster == nil {
		return false
	}
	for _, r := range si.Cluster.Replicas {
		if r.Name == name {
			return r.Current && r.Lag == 0
		}
	}
	return si.Cluster.Leader == name
}

// TestClusterStartFailsFastOnDeadNode checks that WaitReady reports a node
// that could not start instead of waiting out its deadline.
func TestClusterStartFailsFastOnDeadNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts NATS processes")
	}
	c := natscluster.Start(t, 1, os.Args[0], "not-a-command")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := c.WaitReady(ctx)
	if err == nil || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "exited") {
		t.Fatalf("WaitReady: %v", err)
	}
}
