package natsauth_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/executor"
	"github.com/converge-pve/converge/internal/app"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/natsauth"
	"github.com/converge-pve/converge/internal/natsserver"
	"github.com/converge-pve/converge/internal/pvesim"
	"github.com/converge-pve/converge/internal/pvesim/pvesimtest"
)

func setPasswords(t *testing.T) map[natsauth.Role]string {
	pw := map[natsauth.Role]string{}
	for _, r := range natsauth.Roles {
		pw[r] = "pw-" + string(r) + "-0123456789abcdef"
		t.Setenv(natsauth.PasswordVar(r), pw[r])
	}
	// What the shipped configurations read from the environment
	// (deploy/nats/nats.env.example); the nodes' options override the
	// addresses and routes below.
	for k, v := range map[string]string{"NATS_SERVER_NAME": "nats1", "NATS_LISTEN": "127.0.0.1:-1", "NATS_STORE_DIR": t.TempDir(),
		"NATS_CLUSTER_LISTEN": "127.0.0.1:-1", "NATS_ROUTE_1": "nats-route://nats1:6222", "NATS_ROUTE_2": "nats-route://nats2:6222",
		"NATS_ROUTE_3": "nats-route://nats3:6222"} {
		t.Setenv(k, v)
	}
	return pw
}

// Both shipped configurations load, and hold exactly the table's users
// and permissions with the passwords from the environment.
func TestShippedConfigsLoad(t *testing.T) {
	pw := setPasswords(t)
	for _, f := range []string{"converge.conf", "cluster.conf"} {
		opts, err := server.ProcessConfigFile(filepath.Join("..", "..", "deploy", "nats", f))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if len(opts.Users) != len(natsauth.Roles) {
			t.Fatalf("%s: %d users", f, len(opts.Users))
		}
		for _, u := range opts.Users {
			r, err := natsauth.ParseRole(u.Username)
			if err != nil || u.Password != pw[r] {
				t.Fatalf("%s: user %q password %q", f, u.Username, u.Password)
			}
			want := natsauth.For(r, natsauth.DefaultNames)
			switch {
			case want.Unrestricted() && u.Permissions != nil:
				t.Errorf("%s: admin restricted", f)
			case !want.Unrestricted() && (u.Permissions == nil || !equal(u.Permissions.Publish.Allow, want.Publish) ||
				!equal(u.Permissions.Subscribe.Allow, want.Subscribe)):
				t.Errorf("%s: %s permissions %+v, want %+v", f, r, u.Permissions, want)
			}
		}
		if f == "cluster.conf" && (opts.Cluster.Name != "converge" || len(opts.Routes) != 3 || opts.ServerName != "nats1") {
			t.Errorf("cluster.conf: cluster %q, %d routes, name %q", opts.Cluster.Name, len(opts.Routes), opts.ServerName)
		}
	}
}

func equal(a, b []string) bool { return strings.Join(a, "\n") == strings.Join(b, "\n") }

// role connects as a role and records the permission violations the
// server reports (asynchronously, on the connection).
type role struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	denied chan string
}

func connect(t *testing.T, url string, r natsauth.Role, pw string) *role {
	t.Helper()
	c := &role{denied: make(chan string, 16)}
	nc, err := nats.Connect(url, nats.UserInfo(string(r), pw), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrPermissionViolation) || strings.Contains(err.Error(), "Permissions Violation") {
			c.denied <- err.Error()
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	c.nc = nc
	c.js, _ = jetstream.New(nc)
	return c
}

// may publishes to the journal and wants the journal's acknowledgement.
func (c *role) may(t *testing.T, who natsauth.Role, subject string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.js.Publish(ctx, subject, []byte(`{}`)); err != nil {
		t.Errorf("%s cannot publish %s: %v", who, subject, err)
	}
}

// mayNot publishes and wants the server's permission violation (it is
// reported on the connection; the publish itself gets no answer).
func (c *role) mayNot(t *testing.T, who natsauth.Role, subject string) {
	t.Helper()
	if err := c.nc.Publish(subject, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-c.denied:
		if !strings.Contains(e, subject) {
			t.Errorf("%s publishing %s: violation for another subject: %s", who, subject, e)
		}
	case <-time.After(30 * time.Second): // an outer bound: the violation comes at once
		t.Errorf("%s may publish %s", who, subject)
	}
}

const (
	desired, observed, action, result = "pve.desired.pve.101", "pve.observed.pve.101", "pve.action.pve.101", "pve.result.pve.101"
	control, heartbeat                = "pve.control.pve", "pve.heartbeat.pve"
	addresses                         = "pve.addresses.pve.101"
)

// permissions are what each role may and may not publish.
var permissions = []struct {
	role        natsauth.Role
	may, mayNot []string
}{
	{natsauth.Publisher, []string{desired}, []string{action, result, control, observed, addresses}},
	{natsauth.Executor, []string{result}, []string{desired, action, control, addresses}},
	{natsauth.Observer, []string{observed, addresses, heartbeat}, []string{desired}},
	{natsauth.Planner, []string{action}, []string{desired, result, control, addresses}},
	{natsauth.API, []string{desired, control}, []string{action, result, observed, heartbeat}},
	{natsauth.Notify, nil, []string{desired, observed, action, result, control, heartbeat, addresses, "$KV.converge_views.pve.101",
		"$KV.converge_leases.executor-pve.m.x"}},
	{natsauth.Auditor, nil, []string{desired, observed, action, result, control, heartbeat, "$KV.converge_views.pve.101"}},
	{natsauth.Admin, []string{control}, nil},
}

// ownedConsumer is the API on a durable consumer the executors own: no
// other role may create, update, delete, pause or pull from it.
var ownedConsumer = []string{
	"$JS.API.CONSUMER.DELETE.PVE.executor-pve-p06",
	"$JS.API.CONSUMER.CREATE.PVE.executor-pve-p06",
	"$JS.API.CONSUMER.CREATE.PVE.executor-pve-p06.pve.action.pve.*.6",
	"$JS.API.CONSUMER.DURABLE.CREATE.PVE.executor-pve-p06",
	"$JS.API.CONSUMER.PAUSE.PVE.executor-pve-p06",
	"$JS.API.CONSUMER.MSG.NEXT.PVE.executor-pve-p15",
}

func init() {
	for i := range permissions {
		if r := permissions[i].role; r != natsauth.Executor && r != natsauth.Admin {
			permissions[i].mayNot = append(permissions[i].mayNot, ownedConsumer...)
		}
	}
}

func checkPermissions(t *testing.T, url string, pw map[natsauth.Role]string) {
	t.Helper()
	for _, p := range permissions {
		c := connect(t, url, p.role, pw[p.role])
		for _, s := range p.may {
			c.may(t, p.role, s)
		}
		for _, s := range p.mayNot {
			c.mayNot(t, p.role, s)
		}
	}
}

// startShipped starts nats-server with the shipped single-node
// configuration and returns its URL.
func startShipped(t *testing.T) string {
	t.Helper()
	srv, err := natsserver.Start(natsserver.Options{DataDir: t.TempDir(), Listen: "127.0.0.1:-1",
		ConfigFile: filepath.Join("..", "..", "deploy", "nats", "converge.conf")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	return srv.ClientURL()
}

// busAs is the default bus Config of user at url, silent.
func busAs(url, user, password string, replicas int) bus.Config {
	c := bus.DefaultConfig()
	c.URLs, c.User, c.Password, c.Replicas, c.Logger = url, user, password, replicas, zerolog.Nop()
	return c
}

// provisioned connects as admin and provisions what converge keeps in
// NATS, as `converge provision` does.
func provisioned(t *testing.T, ctx context.Context, url string, pw map[natsauth.Role]string, replicas int) *bus.Bus {
	t.Helper()
	admin, err := bus.Connect(ctx, busAs(url, "admin", pw[natsauth.Admin], replicas))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	if err := admin.Provision(ctx); err != nil { // retried while a cluster elects its leaders
		t.Fatal(err)
	}
	if _, err := admin.LeaseStore(ctx, executor.DefaultLeaseTTL, replicas); err != nil {
		t.Fatal(err)
	}
	if err := admin.Checkpoints().Open(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.LimitsStore(ctx, replicas); err != nil {
		t.Fatal(err)
	}
	return admin
}

// A nats-server started with the shipped single-node configuration lets
// each role publish its own events and read the journal, and nothing
// else: the publisher cannot publish actions, results or resync requests,
// the executor cannot publish desired state, the auditor cannot publish
// at all.
func TestShippedConfigPermissions(t *testing.T) {
	pw := setPasswords(t)
	url := startShipped(t)
	if nc, err := nats.Connect(url); err == nil {
		nc.Close()
		t.Fatal("a client without credentials was accepted")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	provisioned(t, ctx, url, pw, 1)
	checkPermissions(t, url, pw)
	aud := connect(t, url, natsauth.Auditor, pw[natsauth.Auditor])
	// The auditor reads: the journal's extent and its entries.
	s, err := aud.js.Stream(ctx, bus.DefaultStream)
	if err != nil {
		t.Fatalf("auditor cannot read the journal: %v", err)
	}
	info, err := s.Info(ctx)
	if err != nil || info.State.Msgs == 0 {
		t.Fatalf("auditor: stream info %+v %v", info, err)
	}
	if _, err := s.GetMsg(ctx, info.State.FirstSeq); err != nil {
		t.Fatalf("auditor cannot read an entry: %v", err)
	}
}

// Observer, planner and executor each connected as its own user of the
// shipped configuration (as three processes would be) converge a desired
// change published by the publisher, and the auditor reads the result.
func TestShippedConfigPipeline(t *testing.T) {
	pw := setPasswords(t)
	url := startShipped(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	provisioned(t, ctx, url, pw, 1)
	sim := pvesimtest.Start(t, pvesim.Options{Guests: 4, Nodes: 1})
	for _, r := range []natsauth.Role{natsauth.Observer, natsauth.Planner, natsauth.Executor} {
		cfg := app.DefaultConfig()
		cfg.Roles = app.Roles{Observer: r == natsauth.Observer, Planner: r == natsauth.Planner, Executor: r == natsauth.Executor}
		cfg.Bus, cfg.Proxmox = busAs(url, string(r), pw[r], 1), pvesimtest.Client(t, sim)
		cfg.Logger = zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel).With().Str("as", string(r)).Logger()
		cfg.Observer.Interval = 200 * time.Millisecond
		actx, acancel := context.WithCancel(context.Background())
		a, err := app.Start(actx, cfg)
		if err != nil {
			acancel()
			t.Fatalf("%s: %v", r, err)
		}
		t.Cleanup(func() { acancel(); _ = a.Wait() })
	}
	// The publisher publishes desired state; the roles converge it.
	pub, err := bus.Connect(ctx, busAs(url, "publisher", pw[natsauth.Publisher], 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pub.Close)
	var vmid int
	for _, g := range sim.Guests() {
		if g.Status == "stopped" && !g.Template {
			vmid = g.VMID
			break
		}
	}
	on := events.PowerRunning
	m, err := events.DesiredMessage(&events.Desired{VMID: vmid, Power: &on}, events.PublishOptions{Publisher: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pub.Append(ctx, m, journal.Expect{}); err != nil {
		t.Fatal(err)
	}
	for {
		if g, _ := sim.Guest(vmid); g.Status == "running" {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("guest %d not started by the roles as their own users", vmid)
		case <-time.After(50 * time.Millisecond): // polling another process's outcome
		}
	}
	// The auditor reads what happened.
	aud, err := bus.Connect(ctx, busAs(url, "auditor", pw[natsauth.Auditor], 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(aud.Close)
	// The guest runs once its task does; the result is journalled after.
	for {
		lasts, err := aud.Lasts(ctx, events.DefaultCluster, vmid, events.KindResult)
		if err != nil {
			t.Fatalf("auditor cannot read results: %v", err)
		}
		if lasts[0] != nil {
			if r, err := events.Decode[events.Result](lasts[0].Data); err == nil && r.Status == events.ResultSucceeded {
				break
			}
		}
		select {
		case <-ctx.Done():
			t.Fatal("no succeeded result journalled")
		case <-time.After(50 * time.Millisecond): // polling another role's outcome
		}
	}
}

// Three nodes started with the shipped cluster configuration form a
// JetStream cluster holding the journal at three replicas, with the same
// users and permissions: the publisher cannot publish actions, results or
// resync requests, the executor cannot publish desired state, the auditor
// cannot publish at all; each publishes its own events.
func TestShippedClusterConfig(t *testing.T) {
	pw := setPasswords(t)
	var routes, listens []string
	for range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		listens = append(listens, ln.Addr().String())
		routes = append(routes, "nats-route://"+ln.Addr().String())
		ln.Close()
	}
	var urls []string
	for i := range 3 {
		// The file's routes name hosts nats1..3; here the nodes are on
		// loopback ports, which the options override.
		srv, err := natsserver.Start(natsserver.Options{DataDir: t.TempDir(), Listen: "127.0.0.1:-1", Name: fmt.Sprintf("nats%d", i+1),
			ConfigFile: filepath.Join("..", "..", "deploy", "nats", "cluster.conf"),
			Cluster:    &natsserver.ClusterOptions{Name: "converge", Listen: listens[i], Routes: routes}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Shutdown)
		urls = append(urls, srv.ClientURL())
	}
	url := strings.Join(urls, ",")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := provisioned(t, ctx, url, pw, 3)
	info, err := admin.JS.Stream(ctx, bus.DefaultStream)
	if err != nil || info.CachedInfo().Config.Replicas != 3 {
		t.Fatalf("journal: %v", err)
	}
	checkPermissions(t, url, pw)
	if nc, err := nats.Connect(url); err == nil {
		nc.Close()
		t.Fatal("a client without credentials was accepted")
	}
}
