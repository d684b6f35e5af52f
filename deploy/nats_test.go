package deploy_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/converge-pve/converge/internal/natsauth"
)

// natsEnv sets every variable the configurations in nats/ read, as
// nats/nats.env.example lists them (a password per role of users.conf, and
// the server's name, addresses, store and routes), and returns the
// passwords by variable. A test then overrides what it runs differently.
func natsEnv(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("nats/users.conf")
	if err != nil {
		t.Fatal(err)
	}
	vars := regexp.MustCompile(`\$(CONVERGE_NATS_[A-Z]+_PASSWORD)`).FindAllStringSubmatch(string(b), -1)
	if len(vars) != len(natsauth.Roles) {
		t.Fatalf("users.conf: %d password variables, want %d (one per role)", len(vars), len(natsauth.Roles))
	}
	example := envExample(t)
	pw := map[string]string{}
	for _, v := range vars {
		if _, ok := example[v[1]]; !ok {
			t.Errorf("nats/nats.env.example does not list %s", v[1])
		}
		pw[v[1]] = "pw-" + v[1]
	}
	for k, v := range example {
		if p, ok := pw[k]; ok {
			v = p
		}
		t.Setenv(k, v)
	}
	t.Setenv("NATS_STORE_DIR", t.TempDir())
	return pw
}

// envExample reads nats/nats.env.example.
func envExample(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("nats/nats.env.example")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			out[k] = v
		}
	}
	return out
}

// loadNATS parses a configuration with nats-server's own parser, as node
// name, listening on a loopback port of its own (NATS_LISTEN), storing
// under a temporary directory (NATS_STORE_DIR), quietly: what the
// environment sets, the file taken unchanged.
func loadNATS(t *testing.T, file, name string) *server.Options {
	t.Helper()
	t.Setenv("NATS_SERVER_NAME", name)
	t.Setenv("NATS_LISTEN", "127.0.0.1:-1")
	t.Setenv("NATS_STORE_DIR", t.TempDir())
	opts, err := server.ProcessConfigFile(file)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	opts.HTTPHost, opts.HTTPPort = "", 0
	opts.NoLog, opts.NoSigs = os.Getenv("DEPLOY_TEST_NATS_LOG") == "", true
	return opts
}

func startNATS(t *testing.T, opts *server.Options) *server.Server {
	t.Helper()
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	if !opts.NoLog {
		s.ConfigureLogger()
	}
	s.Start()
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	if !s.ReadyForConnections(20 * time.Second) {
		t.Fatalf("nats-server %s not ready", opts.ServerName)
	}
	return s
}

// TestNATSConfigsParse loads every configuration in nats/ and checks what
// converge relies on: the six role users with their passwords from the
// environment, JetStream, and for the cluster the server name from
// NATS_SERVER_NAME and routes to nats1..3.
func TestNATSConfigsParse(t *testing.T) {
	files, err := filepath.Glob("nats/*.conf")
	if err != nil || len(files) == 0 {
		t.Fatalf("no nats/*.conf: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			pw := natsEnv(t)
			t.Setenv("NATS_SERVER_NAME", "nats2")
			opts, err := server.ProcessConfigFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if len(opts.Users) != len(natsauth.Roles) {
				t.Errorf("%d users, want %d", len(opts.Users), len(natsauth.Roles))
			}
			for _, u := range opts.Users {
				if want := pw[fmt.Sprintf("CONVERGE_NATS_%s_PASSWORD", upper(u.Username))]; u.Password != want {
					t.Errorf("user %s: password %q, want %q from the environment", u.Username, u.Password, want)
				}
			}
			switch filepath.Base(f) {
			case "users.conf":
				return
			case "cluster.conf":
				if opts.ServerName != "nats2" {
					t.Errorf("server_name %q, want NATS_SERVER_NAME's nats2", opts.ServerName)
				}
				if opts.Cluster.Name != "converge" || opts.Cluster.Port != 6222 {
					t.Errorf("cluster %q port %d, want converge on NATS_CLUSTER_LISTEN's 6222", opts.Cluster.Name, opts.Cluster.Port)
				}
				var routes []string
				for _, r := range opts.Routes {
					routes = append(routes, r.Host)
				}
				if fmt.Sprint(routes) != "[nats1:6222 nats2:6222 nats3:6222]" {
					t.Errorf("routes %v, want NATS_ROUTE_1..3's nats1..3:6222", routes)
				}
			}
			if opts.ServerName != "nats2" || opts.Port != 4222 {
				t.Errorf("server %q on port %d, want NATS_SERVER_NAME's nats2 on NATS_LISTEN's 4222", opts.ServerName, opts.Port)
			}
			if !opts.JetStream || opts.StoreDir != os.Getenv("NATS_STORE_DIR") {
				t.Errorf("JetStream %v, store_dir %q: want JetStream storing in NATS_STORE_DIR", opts.JetStream, opts.StoreDir)
			}
		})
	}
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// TestNATSConfigsStart starts every server configuration of nats/ alone
// on loopback, and the cluster configuration as three nodes whose routes
// are rewritten to each other's loopback ports, and puts a three-replica
// stream on them as admin: the cluster forms and JetStream works.
func TestNATSConfigsStart(t *testing.T) {
	t.Run("converge.conf", func(t *testing.T) {
		pw := natsEnv(t)
		s := startNATS(t, loadNATS(t, "nats/converge.conf", ""))
		putStream(t, s.ClientURL(), pw["CONVERGE_NATS_ADMIN_PASSWORD"], 1)
	})
	t.Run("cluster.conf/one-node", func(t *testing.T) {
		natsEnv(t)
		ports := freePorts(t, 3)
		startNATS(t, clusterNode(t, "nats1", ports[0], ports))
	})
	t.Run("cluster.conf/three-nodes", func(t *testing.T) {
		pw := natsEnv(t)
		ports := freePorts(t, 3)
		var servers []*server.Server
		for i, name := range []string{"nats1", "nats2", "nats3"} {
			servers = append(servers, startNATS(t, clusterNode(t, name, ports[i], ports)))
		}
		putStream(t, servers[2].ClientURL(), pw["CONVERGE_NATS_ADMIN_PASSWORD"], 3)
		// A role user may not create a stream: the server says so.
		denied := make(chan error, 1)
		nc, err := nats.Connect(servers[1].ClientURL(), nats.UserInfo("observer", pw["CONVERGE_NATS_OBSERVER_PASSWORD"]),
			nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
				select {
				case denied <- err:
				default:
				}
			}))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		if err := nc.Publish("$JS.API.STREAM.CREATE.OTHER", []byte(`{"name":"OTHER"}`)); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-denied:
			if !errors.Is(err, nats.ErrPermissionViolation) {
				t.Errorf("observer creating a stream: %v, want a permissions violation", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("observer creating a stream: no permissions violation; users.conf should forbid it")
		}
	})
}

// clusterNode is cluster.conf, unchanged, as node name with its cluster
// port clusterPort and its routes to the loopback ports given, all set
// through its environment (NATS_CLUSTER_LISTEN, NATS_ROUTE_1..3).
// Clustered JetStream refuses to start without routes, so even one node
// alone gets them.
func clusterNode(t *testing.T, name string, clusterPort int, ports []int) *server.Options {
	t.Helper()
	t.Setenv("NATS_CLUSTER_LISTEN", fmt.Sprintf("127.0.0.1:%d", clusterPort))
	for i, p := range ports {
		t.Setenv(fmt.Sprintf("NATS_ROUTE_%d", i+1), fmt.Sprintf("nats-route://127.0.0.1:%d", p))
	}
	opts := loadNATS(t, "nats/cluster.conf", name)
	if opts.ServerName != name || len(opts.Routes) != len(ports) {
		t.Fatalf("server_name %q with %d routes, want %q with %d", opts.ServerName, len(opts.Routes), name, len(ports))
	}
	return opts
}

// freePorts finds n free loopback ports (listened on, then closed).
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// putStream creates a stream of the given replica count as admin, waiting
// (until a deadline) while a fresh cluster elects its JetStream leaders,
// and writes one message to it.
func putStream(t *testing.T, url, adminPassword string, replicas int) {
	t.Helper()
	nc, err := nats.Connect(url, nats.UserInfo("admin", adminPassword))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := jetstream.StreamConfig{Name: "DEPLOYTEST", Subjects: []string{"deploytest.>"}, Replicas: replicas}
	retry := time.NewTicker(100 * time.Millisecond)
	defer retry.Stop()
	for {
		actx, acancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = js.CreateStream(actx, cfg)
		acancel()
		if err == nil {
			break
		}
		// A cluster without a meta leader answers 503 or not at all.
		var apiErr *jetstream.APIError
		transient := errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrNoResponders) ||
			errors.Is(err, jetstream.ErrNoStreamResponse) || (errors.As(err, &apiErr) && apiErr.Code == 503)
		if !transient || ctx.Err() != nil {
			t.Fatalf("create an R%d stream: %v", replicas, err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("create an R%d stream: %v", replicas, err)
		case <-retry.C:
		}
	}
	if _, err := js.Publish(ctx, "deploytest.x", []byte("x")); err != nil {
		t.Fatalf("publish to the R%d stream: %v", replicas, err)
	}
}
