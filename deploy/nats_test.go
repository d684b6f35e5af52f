package deploy_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsEnv sets every variable the configurations in nats/ read (the role
// passwords of users.conf) and returns the passwords by variable.
func natsEnv(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("nats/users.conf")
	if err != nil {
		t.Fatal(err)
	}
	vars := regexp.MustCompile(`\$(CONVERGE_NATS_[A-Z]+_PASSWORD)`).FindAllStringSubmatch(string(b), -1)
	if len(vars) != 6 {
		t.Fatalf("users.conf: %d password variables, want 6 (one per role)", len(vars))
	}
	pw := map[string]string{}
	for _, v := range vars {
		pw[v[1]] = "pw-" + v[1]
		t.Setenv(v[1], pw[v[1]])
	}
	return pw
}

// loadNATS parses a configuration with nats-server's own parser and makes
// it listen on loopback ports of its own, storing under a temporary
// directory, quietly.
func loadNATS(t *testing.T, file, name string) *server.Options {
	t.Helper()
	t.Setenv("NATS_SERVER_NAME", name)
	opts, err := server.ProcessConfigFile(file)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	opts.Host, opts.Port = "127.0.0.1", -1
	opts.HTTPHost, opts.HTTPPort = "", 0
	if opts.JetStream {
		opts.StoreDir = t.TempDir()
	}
	if opts.Cluster.Port != 0 {
		opts.Cluster.Host, opts.Cluster.Port = "127.0.0.1", -1
	}
	opts.Routes = nil
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
			if len(opts.Users) != 6 {
				t.Errorf("%d users, want 6", len(opts.Users))
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
					t.Errorf("cluster %q port %d, want converge on 6222", opts.Cluster.Name, opts.Cluster.Port)
				}
				var routes []string
				for _, r := range opts.Routes {
					routes = append(routes, r.Host)
				}
				if fmt.Sprint(routes) != "[nats1:6222 nats2:6222 nats3:6222]" {
					t.Errorf("routes %v, want nats1..3:6222", routes)
				}
			}
			if !opts.JetStream || opts.StoreDir == "" {
				t.Errorf("JetStream %v, store_dir %q: want JetStream with a store", opts.JetStream, opts.StoreDir)
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

// clusterNode is cluster.conf as node name (NATS_SERVER_NAME), its cluster
// port clusterPort and its routes nats1..3:6222 rewritten to the loopback
// ports given, in order. Clustered JetStream refuses to start without
// routes, so even one node alone gets them.
func clusterNode(t *testing.T, name string, clusterPort int, ports []int) *server.Options {
	t.Helper()
	parsed, err := func() (*server.Options, error) {
		t.Setenv("NATS_SERVER_NAME", name)
		return server.ProcessConfigFile("nats/cluster.conf")
	}()
	if err != nil {
		t.Fatal(err)
	}
	if len(parsed.Routes) != len(ports) {
		t.Fatalf("cluster.conf: %d routes, want %d", len(parsed.Routes), len(ports))
	}
	opts := loadNATS(t, "nats/cluster.conf", name)
	if opts.ServerName != name {
		t.Fatalf("server_name %q, want %q", opts.ServerName, name)
	}
	opts.Cluster.Port = clusterPort
	for i, r := range parsed.Routes {
		u := *r
		u.Host = fmt.Sprintf("127.0.0.1:%d", ports[i])
		opts.Routes = append(opts.Routes, &u)
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
