package app

import (
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/converge-pve/converge/internal/api"

	"github.com/rs/zerolog"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/executor"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/natsauth"
	"github.com/converge-pve/converge/internal/natsserver"
	"github.com/converge-pve/converge/internal/notify"
	"github.com/converge-pve/converge/internal/observer"
	"github.com/converge-pve/converge/internal/planloop"
)

// Roles says which roles a process runs.
//
// API alone is the process that serves the HTTP API for a distributed
// deployment (`converge api`, NATS user api): /v1's writes publish
// desired state and operators' requests, which the other roles' users may
// not. `up` serves it with every role (as admin).
type Roles struct{ Observer, Planner, Executor, API bool }

// All is every role, as `converge up` runs them.
var All = Roles{Observer: true, Planner: true, Executor: true, API: true}

func (r Roles) count() int {
	n := 0
	for _, on := range []bool{r.Observer, r.Planner, r.Executor, r.API} {
		if on {
			n++
		}
	}
	return n
}

// first is the NATS role of the process's main connection: its first
// role's (an `up` process runs as admin, which may publish anything).
func (r Roles) first() natsauth.Role {
	switch {
	case r.Observer:
		return natsauth.Observer
	case r.Planner:
		return natsauth.Planner
	case r.Executor:
		return natsauth.Executor
	}
	return natsauth.API
}

// Proxmox is what the observer and the executors need of Proxmox VE
// (*pve.Client).
type Proxmox interface {
	observer.Proxmox
	observer.HAReader
	executor.Proxmox
}

// Config is everything one converge process runs with. Start from
// [DefaultConfig]: a field left zero is refused by [Config.Validate], not
// read as its default. Each role's own configuration keeps its defaults
// and validation (observer.Config, planloop.Config, executor.Config,
// bus.Config); what they share is the process's: Start sets each role's
// cluster, name (<role>@Name), partition and replica counts from Cluster,
// Name and Bus, and the executors judge with the planner's policy.
type Config struct {
	// Cluster is the Proxmox cluster id.
	Cluster string
	// Name names this instance in events, logs and connection names.
	Name  string
	Roles Roles
	// Bus is the NATS connection and journal resources. Its URLs are
	// ignored when Embedded is set.
	Bus bus.Config
	// Embedded, if set, runs an embedded nats-server (converge up without
	// --nats) and connects to it in-process.
	Embedded *natsserver.Options
	// Proxmox is what the observer and executors drive; required when
	// either runs ([Setup] makes one).
	Proxmox  Proxmox
	Observer observer.Config
	Planner  planloop.Config
	// Executor configures each executor; its Policy is the planner's.
	Executor executor.Config
	// Executors is how many executor instances the process runs (the
	// bench measures scale-out with more).
	Executors int
	// HTTP, if set, is where the HTTP API listens (/metrics, /healthz,
	// /readyz, /v1).
	HTTP string
	// HTTPAuth guards /v1 (docs/http.md). Without tokens the API is open
	// to whoever reaches it, which is allowed only on a loopback address
	// and only with NoAuth set; a non-loopback address also needs TLS,
	// unless Insecure.
	HTTPAuth HTTPAuth
	// HTTPSign, if set, signs desired state posted over HTTP before it
	// is journalled.
	HTTPSign func(m *events.Message) error
	// Notify, if set, runs a notifier beside the roles (`converge up
	// --notify-config`), its metrics on the process's registry.
	Notify *notify.Config
	// Ready says how readiness (/readyz) is probed.
	Ready  ReadyConfig
	Logger zerolog.Logger
}

// DefaultConfig is every role's defaults, for the default cluster, named
// after the host, one executor, no HTTP API and no role: Roles, the NATS
// URL (or Embedded) and Proxmox are the caller's.
func DefaultConfig() Config {
	host, _ := os.Hostname()
	return Config{Cluster: events.DefaultCluster, Name: host, Bus: bus.DefaultConfig(), Observer: observer.DefaultConfig(),
		Planner: planloop.DefaultConfig(), Executor: executor.DefaultConfig(), Executors: 1,
		HTTPAuth: HTTPAuth{Limits: api.DefaultLimits()}, Ready: DefaultReadyConfig()}
}

// FollowObserveInterval sets what follows the observer's interval, as
// DefaultConfig has it for the default one: the planner's ObserverTimeout
// (three intervals: one slow pass is no outage) and readiness's
// ProxmoxFresh (DefaultProxmoxFresh).
func (c *Config) FollowObserveInterval() {
	c.Planner.Planner.Policy.ObserverTimeout = 3 * c.Observer.Interval
	c.Ready.ProxmoxFresh = DefaultProxmoxFresh(c.Observer.Interval)
}

// Validate checks that the process can run (ValidateSettings, then a
// role, a NATS and a Proxmox for the roles that need one).
func (c Config) Validate() error {
	if err := c.ValidateSettings(); err != nil {
		return err
	}
	switch {
	case c.Roles.count() == 0:
		return errors.New("app: no role to run")
	case c.Roles == (Roles{API: true}) && c.HTTP == "":
		return errors.New("app: the api role serves the HTTP API: give it --http")
	case (c.Roles.Observer || c.Roles.Executor) && c.Proxmox == nil:
		return errors.New("app: the observer and the executor need a Proxmox (--pve-url)")
	case c.Embedded == nil && c.Bus.URLs == "":
		return errors.New("app: no NATS URL (--nats / CONVERGE_NATS_URL) and no embedded server")
	}
	return nil
}

// ValidateSettings checks the settings, each role's configuration as
// Start hands it out (with the process's shared settings) whether the
// role runs or not, naming the field; not what the process connects to.
func (c Config) ValidateSettings() error {
	if err := events.ValidateCluster(c.Cluster); err != nil {
		return fmt.Errorf("app.Config.Cluster: %w", err)
	}
	switch {
	case c.Name == "":
		return errors.New("app.Config.Name: must be set (the host name by default)")
	case c.Executors < 1 || c.Executors > 64:
		return fmt.Errorf("app.Config.Executors: must be within 1..64, got %d", c.Executors)
	}
	w := c.wired()
	if w.Bus.URLs == "" && w.Bus.InProcess == nil {
		w.Bus.URLs = "nats://unset" // Validate says what is missing
	}
	for _, v := range []interface{ Validate() error }{w.Bus, w.Observer, w.Planner, w.Executor, w.Ready, w.HTTPAuth.Limits} {
		if err := v.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// wired is c with the process's shared settings in each role's
// configuration.
func (c Config) wired() Config {
	c.Bus.Logger = c.Logger
	c.Observer.Cluster, c.Observer.Name = c.Cluster, "observer@"+c.Name
	pc := &c.Planner.Planner
	pc.Cluster, pc.Partitions, pc.Name = c.Cluster, c.Bus.Partitions, "planner@"+c.Name
	c.Planner.Stream, c.Planner.Replicas = c.Bus.Stream, c.Bus.Replicas
	c.Executor.Cluster, c.Executor.Partitions, c.Executor.Replicas = c.Cluster, c.Bus.Partitions, c.Bus.Replicas
	c.Executor.Name = "executor@" + c.Name
	// The executor runs only what the planner's Plan produces, so it
	// judges with the planner's policy.
	c.Executor.Policy = c.Planner.Planner.Policy
	return c
}

// connName is a connection's name in server monitoring.
func (c *Config) connName(role string) string { return role + "@" + c.Name }

// HTTPAuth is who may reach the HTTP API and how.
type HTTPAuth struct {
	// Guard.Tokens open /v1 to their holders; without them (and without
	// Guard.NoAuth) /v1 refuses every call and the server serves health
	// and metrics alone.
	Guard  api.Guard
	Limits api.Limits
	// TLSCert and TLSKey, if set, serve HTTPS.
	TLSCert, TLSKey string
	// Insecure allows /v1 on a non-loopback address without TLS.
	Insecure bool
}

// check refuses an HTTP configuration that would open converge to
// whoever reaches the address; warn names what is allowed but unsafe.
func (h HTTPAuth) check(addr string) (warn string, err error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("--http %q: %w", addr, err)
	}
	ip := net.ParseIP(host)
	loopback := host == "localhost" || (ip != nil && ip.IsLoopback())
	tls := h.TLSCert != "" && h.TLSKey != ""
	v1 := h.Guard.Tokens != nil || h.Guard.NoAuth
	switch {
	case (h.TLSCert == "") != (h.TLSKey == ""):
		return "", errors.New("--http-tls-cert and --http-tls-key go together")
	case h.Guard.NoAuth && !loopback:
		return "", fmt.Errorf("--http-no-auth on %s: refused, anyone who reaches it could change guests; bind a loopback address or use --http-tokens", addr)
	case v1 && !loopback && !tls && !h.Insecure:
		return "", fmt.Errorf("--http %s is not a loopback address: serve the API with TLS (--http-tls-cert/--http-tls-key), or force plain HTTP with --http-insecure", addr)
	case v1 && !loopback && !tls:
		return "HTTP API ON A NON-LOOPBACK ADDRESS WITHOUT TLS (--http-insecure): bearer tokens and guests' state cross the network in clear", nil
	case h.Guard.NoAuth:
		return "HTTP API WITHOUT AUTHENTICATION (--http-no-auth): every local user and process can change guests", nil
	}
	return "", nil
}
