package natsserver

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/rs/zerolog"
)

// Options configure the in-process nats-server.
type Options struct {
	// DataDir holds JetStream's files. Required: the journal must survive
	// restarts.
	DataDir string
	// Listen is host:port for clients (port 0 or -1 picks a free one);
	// empty listens on 127.0.0.1 with a free port.
	Listen string
	// Name is the server name (default "converge"). It must be unique
	// within a cluster.
	Name string
	// ConfigFile, if set, is a nats-server config file loaded first
	// (accounts, users, permissions, TLS); the fields above override it.
	ConfigFile string
	// Users, if set, are the only clients the server accepts (with their
	// permissions); a client without credentials is refused.
	Users []*server.User
	// Cluster, if set, makes the server one node of a JetStream cluster.
	Cluster *ClusterOptions
	// Logger, if set, receives nats-server's own log (notices at info,
	// nats-server debug only when the logger is at debug). Nil: silent.
	Logger *zerolog.Logger
}

// ClusterOptions join an embedded server to a JetStream cluster: every node
// names the same cluster and routes to every node (itself included, which
// nats-server ignores), so any node can be started first.
type ClusterOptions struct {
	// Name is the cluster's name, the same on every node. Required.
	Name string
	// Listen is host:port for routes from the other nodes. Required, with
	// a fixed port: the other nodes' Routes name it.
	Listen string
	// Routes are nats-route://host:port URLs of the cluster's nodes.
	Routes []string
}

// Start starts nats-server with JetStream and waits until it
// accepts connections. A cluster node accepts connections before the
// cluster has elected its JetStream meta leader; JetStream requests fail
// until then (seconds: Raft election timeouts).
func Start(o Options) (*server.Server, error) {
	if o.DataDir == "" {
		return nil, fmt.Errorf("natsserver: Options.DataDir is required")
	}
	opts := &server.Options{}
	if o.ConfigFile != "" {
		fo, err := server.ProcessConfigFile(o.ConfigFile)
		if err != nil {
			return nil, fmt.Errorf("natsserver: nats config %s: %w", o.ConfigFile, err)
		}
		opts = fo
	}
	opts.Users = append(opts.Users, o.Users...)
	opts.ServerName = o.Name
	if opts.ServerName == "" {
		opts.ServerName = "converge"
	}
	opts.JetStream = true
	opts.StoreDir = o.DataDir
	opts.NoSigs = true
	opts.NoLog = o.Logger == nil
	if o.Logger != nil {
		opts.Debug = o.Logger.GetLevel() <= zerolog.DebugLevel
	}
	host, port := "127.0.0.1", -1
	if o.Listen != "" {
		h, p, err := splitListen(o.Listen, "--nats-listen")
		if err != nil {
			return nil, err
		}
		if h != "" {
			host = h
		}
		if port = p; port == 0 {
			port = -1
		}
	}
	opts.Host, opts.Port = host, port
	if port > 0 {
		// nats-server's accept loop fails on a busy port without telling
		// Start, which would wait out its 30 s for a server that never
		// comes: find out now.
		if err := portFree(host, port, "--nats-listen"); err != nil {
			return nil, err
		}
	}
	if o.Cluster != nil {
		if err := applyCluster(opts, o); err != nil {
			return nil, err
		}
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("natsserver: nats-server: %w", err)
	}
	if o.Logger != nil {
		s.SetLoggerV2(natsLogger{o.Logger.With().Str("component", "nats-server").Logger()}, opts.Debug, false, false)
	}
	go s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("natsserver: nats-server did not become ready on %s:%d", host, port)
	}
	return s, nil
}

// portFree checks that host:port can be listened on.
func portFree(host string, port int, flag string) error {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("%s %s: %w (another converge up or nats-server running? stop it, or choose another address)", flag, net.JoinHostPort(host, strconv.Itoa(port)), err)
	}
	return ln.Close()
}

func splitListen(hostport, flag string) (string, int, error) {
	h, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", 0, fmt.Errorf("%s %q: %w", flag, hostport, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < -1 || port > 65535 {
		return "", 0, fmt.Errorf("%s %q: bad port", flag, hostport)
	}
	return h, port, nil
}

// applyCluster sets the route listener and routes. A JetStream cluster
// needs unique server names and a cluster name (nats-server refuses to
// start JetStream clustered otherwise).
func applyCluster(opts *server.Options, o Options) error {
	c := o.Cluster
	switch {
	case c.Name == "":
		return fmt.Errorf("natsserver: a cluster node needs a cluster name")
	case o.Name == "":
		return fmt.Errorf("natsserver: a cluster node needs a server name of its own")
	case len(c.Routes) == 0:
		return fmt.Errorf("natsserver: cluster %s: no routes", c.Name)
	}
	h, p, err := splitListen(c.Listen, "--cluster-listen")
	if err != nil {
		return err
	}
	if p <= 0 {
		// The other nodes route to this port: it must be known up front.
		return fmt.Errorf("natsserver: --cluster-listen %q: the route port must be fixed", c.Listen)
	}
	if h == "" {
		h = "127.0.0.1"
	}
	routes := make([]*url.URL, 0, len(c.Routes))
	for _, r := range c.Routes {
		u, err := url.Parse(strings.TrimSpace(r))
		if err != nil || u.Host == "" || (u.Scheme != "nats-route" && u.Scheme != "nats") || u.Port() == "" {
			return fmt.Errorf("natsserver: route %q: want nats-route://host:port", r)
		}
		routes = append(routes, u)
	}
	opts.Cluster.Name, opts.Cluster.Host, opts.Cluster.Port = c.Name, h, p
	opts.Routes = routes
	return nil
}

// natsLogger writes nats-server's log through zerolog.
type natsLogger struct{ log zerolog.Logger }

func (l natsLogger) Noticef(format string, v ...any) { l.log.Info().Msgf(format, v...) }
func (l natsLogger) Warnf(format string, v ...any)   { l.log.Warn().Msgf(format, v...) }
func (l natsLogger) Fatalf(format string, v ...any)  { l.log.Error().Msgf(format, v...) }
func (l natsLogger) Errorf(format string, v ...any)  { l.log.Error().Msgf(format, v...) }
func (l natsLogger) Debugf(format string, v ...any)  { l.log.Debug().Msgf(format, v...) }
func (l natsLogger) Tracef(format string, v ...any)  { l.log.Trace().Msgf(format, v...) }
