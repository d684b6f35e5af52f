package bus

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// EmbeddedOptions configure the in-process nats-server.
type EmbeddedOptions struct {
	// DataDir holds JetStream's files. Required: the journal must survive
	// restarts.
	DataDir string
	// Listen is host:port for clients (port 0 or -1 picks a free one);
	// empty listens on 127.0.0.1 with a free port.
	Listen string
	// Name is the server name (default "converge").
	Name string
	// ConfigFile, if set, is a nats-server config file loaded first
	// (accounts, users, permissions, TLS); the fields above override it.
	ConfigFile string
}

// StartEmbedded starts nats-server with JetStream and waits until it
// accepts connections.
func StartEmbedded(o EmbeddedOptions) (*server.Server, error) {
	if o.DataDir == "" {
		return nil, fmt.Errorf("bus: EmbeddedOptions.DataDir is required")
	}
	opts := &server.Options{}
	if o.ConfigFile != "" {
		fo, err := server.ProcessConfigFile(o.ConfigFile)
		if err != nil {
			return nil, fmt.Errorf("bus: nats config %s: %w", o.ConfigFile, err)
		}
		opts = fo
	}
	opts.ServerName = o.Name
	if opts.ServerName == "" {
		opts.ServerName = "converge"
	}
	opts.JetStream = true
	opts.StoreDir = o.DataDir
	opts.NoSigs = true
	opts.NoLog = true
	host, port := "127.0.0.1", -1
	if o.Listen != "" {
		h, p, err := net.SplitHostPort(o.Listen)
		if err != nil {
			return nil, fmt.Errorf("bus: --nats-listen %q: %w", o.Listen, err)
		}
		if h != "" {
			host = h
		}
		if port, err = strconv.Atoi(p); err != nil {
			return nil, fmt.Errorf("bus: --nats-listen %q: bad port", o.Listen)
		}
		if port == 0 {
			port = -1
		}
	}
	opts.Host, opts.Port = host, port
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("bus: nats-server: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("bus: nats-server did not become ready on %s:%d", host, port)
	}
	return s, nil
}
