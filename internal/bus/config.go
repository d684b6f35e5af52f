package bus

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// Config describes how to reach NATS and which JetStream resources to use.
type Config struct {
	// URLs is a comma-separated list of server URLs (env CONVERGE_NATS_URL).
	URLs string
	// InProcess, if set, is an embedded server (package natsserver) to
	// connect to in-process, without a socket.
	InProcess nats.InProcessConnProvider
	// Name is the client connection name, shown in server monitoring.
	Name string

	User, Password string
	Token          string
	CredsFile      string // JWT + nkey seed, as issued by nsc
	NKeyFile       string // nkey seed file
	TLSCA          string
	TLSCert        string
	TLSKey         string

	// Stream is the journal stream's name (default "PVE").
	Stream string
	// Bucket is the views KV bucket (default "converge_views").
	Bucket string
	// Partitions of the vmid space (default 16), fixed at stream creation.
	Partitions int
	// Replicas of the stream and bucket (default 1; 3 on a cluster).
	Replicas int
	// MaxAge and MaxBytes bound the journal (0: unlimited); the oldest
	// events go first.
	MaxAge   time.Duration
	MaxBytes int64
	// LimitsUnset leaves an existing journal's MaxAge and MaxBytes as they
	// are (converge provision run without --retention-* flags).
	LimitsUnset bool

	Logger zerolog.Logger
}

// Defaults of Config, each with its reason.
const (
	// DefaultStream and DefaultBucket name the journal and the views.
	DefaultStream = "PVE"
	DefaultBucket = "converge_views"
	// DefaultPartitions: enough for sixteen executors or planners to share
	// the guests, few enough that each lease round stays small. Fixed when
	// the stream is created.
	DefaultPartitions = 16
)

func (c *Config) defaults() error {
	if c.Stream == "" {
		c.Stream = DefaultStream
	}
	if c.Bucket == "" {
		c.Bucket = DefaultBucket
	}
	if c.Partitions == 0 {
		c.Partitions = DefaultPartitions
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	switch {
	case c.Partitions < 1 || c.Partitions > 1024:
		return fmt.Errorf("bus: Config.Partitions must be within 1..1024, got %d", c.Partitions)
	case c.Replicas < 1 || c.Replicas > 5:
		return fmt.Errorf("bus: Config.Replicas must be within 1..5, got %d", c.Replicas)
	case c.URLs == "" && c.InProcess == nil:
		return errors.New("bus: no NATS URL (--nats / CONVERGE_NATS_URL) and no embedded server")
	case (c.TLSCert == "") != (c.TLSKey == ""):
		return errors.New("bus: a TLS client certificate needs both cert and key")
	case c.CredsFile != "" && c.NKeyFile != "":
		return errors.New("bus: use a creds file or an nkey file, not both")
	}
	return nil
}
