package bus

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// Bus is a connection with its JetStream context and resources.
type Bus struct {
	NC  *nats.Conn
	JS  jetstream.JetStream
	cfg Config
	log zerolog.Logger
	// lasts answers LastMsgs; sc caches the journal stream's handle.
	lasts *lastsMux
	sc    *streamCache
	// writes remembers whether the newest write was refused for storage.
	writes *writeHealth
	// denied remembers the newest JetStream request NATS refused this
	// user (Provision).
	denied *apiDenials
}

type streamCache struct {
	mu sync.Mutex
	s  jetstream.Stream
}

// Connection settings that decide how a client rides out the loss of a
// NATS node.
const (
	// reconnectWait is the pause before dialling a server of the list
	// again; the other servers are tried first.
	reconnectWait = 250 * time.Millisecond
	// pingInterval × maxPingsOut bounds how long a connection to a node
	// that vanished without closing its sockets (host crash, partition)
	// goes unnoticed: nats.go's default is 2 min × 2. A killed process is
	// noticed at once (the kernel resets its connections).
	pingInterval = 5 * time.Second
	maxPingsOut  = 3
	// asyncAckTimeout fails asynchronous publishes whose acknowledgement
	// never comes: a stream leader that dies between storing and replying
	// otherwise leaves the future pending forever (nats.go has no default).
	asyncAckTimeout = 30 * time.Second
	// noResponderWait paces Publish's retries while a stream has no leader.
	noResponderWait = 100 * time.Millisecond
)

// Connect dials NATS. cfg.URLs may list several servers of a cluster: the
// client connects to one, learns the others from it, and on losing it
// reconnects to another without limit (a role waits for the bus rather
// than exiting). Publishes made while it is away are buffered (nats.go's
// 8 MiB reconnect buffer) and sent after the reconnect; their JetStream
// acknowledgements may still time out, and then the caller retries (see
// Publish). The first connect does not retry: a role started against no
// reachable server at all exits with the error.
func Connect(ctx context.Context, cfg Config) (*Bus, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	denied := &apiDenials{user: cfg.User}
	opts := []nats.Option{
		nats.Name(cfg.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(reconnectWait),
		nats.RetryOnFailedConnect(false),
		nats.PingInterval(pingInterval),
		nats.MaxPingsOutstanding(maxPingsOut),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if nc.IsClosed() {
				// Our own Close (every CLI command's end): not news.
				log.Debug().Msg("nats connection closed")
				return
			}
			log.Warn().Err(err).Msg("nats disconnected")
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info().Str("url", nc.ConnectedUrlRedacted()).Msg("nats reconnected")
		}),
		// Asynchronous errors (a slow consumer dropping messages, a
		// permission denied) are otherwise silent in nats.go.
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			denied.note(err)
			ev := log.Warn().Err(err)
			if sub != nil {
				ev = ev.Str("subject", sub.Subject)
				if msgs, bytes, perr := sub.Pending(); perr == nil {
					ev = ev.Int("pending_msgs", msgs).Int("pending_bytes", bytes)
				}
			}
			ev.Msg("nats asynchronous error")
		}),
	}
	if cfg.User != "" {
		opts = append(opts, nats.UserInfo(cfg.User, cfg.Password))
	}
	if cfg.Token != "" {
		opts = append(opts, nats.Token(cfg.Token))
	}
	if cfg.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(cfg.CredsFile))
	}
	if cfg.NKeyFile != "" {
		o, err := nats.NkeyOptionFromSeed(cfg.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("bus: nkey %s: %w", cfg.NKeyFile, err)
		}
		opts = append(opts, o)
	}
	if cfg.TLSCA != "" {
		opts = append(opts, nats.RootCAs(cfg.TLSCA))
	}
	if cfg.TLSCert != "" {
		opts = append(opts, nats.ClientCert(cfg.TLSCert, cfg.TLSKey))
	}
	url := cfg.URLs
	if cfg.InProcess != nil {
		opts = append(opts, nats.InProcessServer(cfg.InProcess))
		url = ""
	}
	nc, err := nats.Connect(strings.ReplaceAll(url, " ", ""), opts...)
	if err != nil {
		return nil, fmt.Errorf("cannot connect to NATS at %s: %w", redactURLs(url), err)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(asyncAckTimeout))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("bus: jetstream: %w", err)
	}
	return &Bus{NC: nc, JS: js, cfg: cfg, log: log, lasts: &lastsMux{}, sc: &streamCache{}, writes: &writeHealth{}, denied: denied}, nil
}

// redactURLs hides passwords in URLs for error messages.
func redactURLs(s string) string {
	var out []string
	for _, u := range strings.Split(s, ",") {
		if at := strings.LastIndex(u, "@"); at > 0 {
			if i := strings.Index(u, "://"); i >= 0 && i < at {
				u = u[:i+3] + "***" + u[at:]
			}
		}
		out = append(out, u)
	}
	return strings.Join(out, ",")
}

// Config returns the resolved configuration.
func (b *Bus) Config() Config { return b.cfg }

// Close drains the connection so buffered publishes and acks go out.
func (b *Bus) Close() {
	if err := b.NC.Drain(); err != nil {
		b.NC.Close()
	}
}

// Another opens a second connection with the same configuration. Each role
// gets its own: one connection is read by one goroutine, and a role that
// receives a flood (the planner folding the journal) would otherwise starve
// another's subscription (the executor's heartbeats and actions).
func (b *Bus) Another(ctx context.Context, name string) (*Bus, error) {
	cfg := b.cfg
	cfg.Name = name
	return Connect(ctx, cfg)
}
