package app

import (
	"errors"
	"fmt"
	"os"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/executor"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/natsserver"
	"github.com/converge-pve/converge/internal/observer"
	"github.com/converge-pve/converge/internal/planloop"
)

// Roles says which roles a process runs.
type Roles struct{ Observer, Planner, Executor bool }

// All is every role, as `converge up` runs them.
var All = Roles{Observer: true, Planner: true, Executor: true}

func (r Roles) count() int {
	n := 0
	for _, on := range []bool{r.Observer, r.Planner, r.Executor} {
		if on {
			n++
		}
	}
	return n
}

// Proxmox is what the observer and the executors need of Proxmox VE
// (*pve.Client).
type Proxmox interface {
	observer.Proxmox
	executor.Proxmox
}

// Config is everything one converge process runs with. Each role's own
// configuration keeps its defaults and validation (observer.Config,
// planloop.Config, executor.Config, bus.Config); Validate fills in what
// they share: the cluster, the instance name, the partition and replica
// counts.
type Config struct {
	// Cluster is the Proxmox cluster id (default events.DefaultCluster).
	Cluster string
	// Name names this instance in events, logs and connection names
	// (default the host name).
	Name  string
	Roles Roles
	// Bus is the NATS connection and journal resources. Its URLs are
	// ignored when Embedded is set.
	Bus bus.Config
	// Embedded, if set, runs an embedded nats-server (converge up without
	// --nats) and connects to it in-process.
	Embedded *natsserver.Options
	// Proxmox is what the observer and executors drive; required when
	// either runs.
	Proxmox  Proxmox
	Observer observer.Config
	Planner  planloop.Config
	Executor executor.Config
	// Executors is how many executor instances the process runs (default
	// 1; the bench measures scale-out with more).
	Executors int
	// HTTP, if set, is where the HTTP API listens (/metrics, /healthz,
	// /readyz, /v1).
	HTTP string
	// Ready says how readiness (/readyz) is probed.
	Ready  ReadyConfig
	Logger zerolog.Logger
}

// Validate fills the shared settings into each role's configuration and
// checks that the process can run.
func (c *Config) Validate() error {
	if c.Cluster == "" {
		c.Cluster = events.DefaultCluster
	}
	if err := events.ValidateCluster(c.Cluster); err != nil {
		return err
	}
	if c.Name == "" {
		c.Name, _ = os.Hostname()
	}
	if c.Roles.count() == 0 {
		return errors.New("app: no role to run")
	}
	if (c.Roles.Observer || c.Roles.Executor) && c.Proxmox == nil {
		return errors.New("app: the observer and the executor need a Proxmox (--pve-url)")
	}
	if c.Embedded == nil && c.Bus.URLs == "" {
		return errors.New("app: no NATS URL (--nats / CONVERGE_NATS_URL) and no embedded server")
	}
	if err := c.Ready.defaults(c.Observer.Interval); err != nil {
		return err
	}
	if c.Executors == 0 {
		c.Executors = 1
	}
	if c.Executors < 1 || c.Executors > 64 {
		return fmt.Errorf("app: Executors must be within 1..64, got %d", c.Executors)
	}
	if c.Bus.Partitions == 0 {
		c.Bus.Partitions = bus.DefaultPartitions
	}
	if c.Bus.Replicas == 0 {
		c.Bus.Replicas = 1
	}
	c.Bus.Logger = c.Logger
	c.Observer.Cluster = c.Cluster
	if c.Observer.Name == "" {
		c.Observer.Name = "observer@" + c.Name
	}
	pc := &c.Planner.Planner
	pc.Cluster, pc.Partitions = c.Cluster, c.Bus.Partitions
	if pc.Name == "" {
		pc.Name = "planner@" + c.Name
	}
	c.Planner.Stream, c.Planner.Replicas = c.Bus.Stream, c.Bus.Replicas
	c.Executor.Cluster, c.Executor.Partitions, c.Executor.Replicas = c.Cluster, c.Bus.Partitions, c.Bus.Replicas
	if c.Executor.Name == "" {
		c.Executor.Name = "executor@" + c.Name
	}
	return nil
}

// connName is a connection's name in server monitoring.
func (c *Config) connName(role string) string { return role + "@" + c.Name }
