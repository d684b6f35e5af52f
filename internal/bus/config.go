package bus

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// Config describes how to reach NATS and which JetStream resources to use.
// Start from [DefaultConfig]: a field left zero is refused by
// [Config.Validate], not read as its default.
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

	// Stream is the journal stream's name.
	Stream string
	// Bucket is the views KV bucket.
	Bucket string
	// Partitions of the vmid space, fixed at stream creation.
	Partitions int
	// Replicas of the stream and bucket (3 on a cluster).
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

// DefaultConfig returns the defaults above, one replica, no limits and no
// server: URLs (or InProcess) and the credentials are the caller's.
func DefaultConfig() Config {
	return Config{Stream: DefaultStream, Bucket: DefaultBucket, Partitions: DefaultPartitions, Replicas: 1}
}

// Validate refuses a Config that cannot work, naming the field; Connect
// calls it.
func (c Config) Validate() error {
	const f = "bus.Config."
	switch {
	case c.Stream == "":
		return errors.New(f + "Stream: must be set")
	case c.Bucket == "":
		return errors.New(f + "Bucket: must be set")
	case c.Partitions < 1 || c.Partitions > 1024:
		return fmt.Errorf(f+"Partitions: must be within 1..1024, got %d", c.Partitions)
	case c.Replicas < 1 || c.Replicas > 5:
		return fmt.Errorf(f+"Replicas: must be within 1..5, got %d", c.Replicas)
	case c.MaxAge < 0:
		return fmt.Errorf(f+"MaxAge: must be >= 0 (0: no age limit), got %s", c.MaxAge)
	case c.MaxBytes < 0:
		return fmt.Errorf(f+"MaxBytes: must be >= 0 (0: no size limit), got %d", c.MaxBytes)
	case c.URLs == "" && c.InProcess == nil:
		return errors.New(f + "URLs: no NATS URL (--nats / CONVERGE_NATS_URL) and no embedded server")
	case (c.TLSCert == "") != (c.TLSKey == ""):
		return errors.New(f + "TLSCert: a TLS client certificate needs both cert and key")
	case c.CredsFile != "" && c.NKeyFile != "":
		return errors.New(f + "CredsFile: use a creds file or an nkey file, not both")
	}
	return nil
}
