package natsauth

import (
	"fmt"
	"slices"
	"strings"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/lease"
)

// Role is a NATS identity of converge; its user name is the role's name.
type Role string

// The roles, each a NATS user of that name.
const (
	Publisher Role = "publisher" // publishes desired state; reads views and the journal to see it applied
	Observer  Role = "observer"
	Planner   Role = "planner"
	Executor  Role = "executor"
	Auditor   Role = "auditor" // reads only
	Admin     Role = "admin"   // everything: provisioning, resync, rebuild
)

// Roles are all roles, in the order files list them.
var Roles = []Role{Publisher, Observer, Planner, Executor, Auditor, Admin}

// ParseRole reads a role's name.
func ParseRole(s string) (Role, error) {
	if r := Role(s); slices.Contains(Roles, r) {
		return r, nil
	}
	return "", fmt.Errorf("unknown NATS role %q (want one of %s)", s, strings.Join(roleNames(), ", "))
}

func roleNames() []string {
	var out []string
	for _, r := range Roles {
		out = append(out, string(r))
	}
	return out
}

// Names are the JetStream resources the permissions name.
type Names struct {
	Stream string // the journal (default bus.DefaultStream)
	Bucket string // the views (default bus.DefaultBucket)
}

// DefaultNames are the resources of a default installation.
var DefaultNames = Names{Stream: bus.DefaultStream, Bucket: bus.DefaultBucket}

func (n Names) orDefault() Names {
	if n.Stream == "" {
		n.Stream = DefaultNames.Stream
	}
	if n.Bucket == "" {
		n.Bucket = DefaultNames.Bucket
	}
	return n
}

// Perms are what a role may publish and subscribe to; nil means
// everything (admin).
type Perms struct {
	Publish, Subscribe []string
}

// Unrestricted reports a role without limits.
func (p Perms) Unrestricted() bool { return p.Publish == nil && p.Subscribe == nil }

// inbox is where requests' answers, pulled messages and watched keys come.
const inbox = "_INBOX.>"

func kind(k events.Kind) string { return events.Prefix + "." + string(k) + ".*.*" }

func clusterKind(k events.Kind) string { return events.Prefix + "." + string(k) + ".*" }

// readStream is the JetStream read API of one stream: its info, direct
// and message gets (single and batched), ephemeral consumers and their
// pulls. Consumers are created, never deleted (they expire).
func readStream(s string) []string {
	api := "$JS.API."
	return []string{
		api + "STREAM.INFO." + s,
		api + "DIRECT.GET." + s, api + "DIRECT.GET." + s + ".>",
		api + "STREAM.MSG.GET." + s,
		api + "CONSUMER.CREATE." + s + ".>",
		api + "CONSUMER.DELETE." + s + ".*", // ephemeral readers clean up after themselves
		api + "CONSUMER.INFO." + s + ".*",
		api + "CONSUMER.MSG.NEXT." + s + ".*",
		"$JS.FC." + s + ".>", // flow control of watchers' push consumers
	}
}

// kvWrite is writing (put, create, update, delete) one bucket's keys.
func kvWrite(bucket string) string { return "$KV." + bucket + ".>" }

// For is role's permissions over the resources n.
func For(role Role, n Names) Perms {
	n = n.orDefault()
	views, leases, ckpts, limits := "KV_"+n.Bucket, "KV_"+lease.Bucket, "OBJ_"+bus.CheckpointBucket, "KV_"+bus.LimitsBucket
	keep := n.Stream + "_KEEP"
	// Every role checks at start that the journal, its keep stream and
	// the views bucket exist as converge wants them (bus.Provision reads
	// them; only admin creates or changes them), and reads the journal.
	read := slices.Concat([]string{"$JS.API.INFO"}, readStream(n.Stream), readStream(keep), readStream(views))
	sub := []string{inbox, clusterKind(events.KindControl)}
	switch role {
	case Admin:
		return Perms{}
	case Publisher:
		return Perms{Publish: slices.Concat([]string{kind(events.KindDesired)}, read), Subscribe: sub}
	case Auditor:
		return Perms{Publish: read, Subscribe: sub}
	case Observer:
		return Perms{Publish: slices.Concat([]string{kind(events.KindObserved), clusterKind(events.KindHeartbeat)}, read),
			Subscribe: sub}
	case Planner:
		return Perms{Publish: slices.Concat([]string{kind(events.KindAction), kvWrite(n.Bucket), kvWrite(lease.Bucket),
			kvWrite(bus.LimitsBucket), "$O." + bus.CheckpointBucket + ".>", "$JS.API.STREAM.PURGE." + ckpts},
			read, readStream(leases), readStream(ckpts), readStream(limits)), Subscribe: sub}
	case Executor:
		return Perms{Publish: slices.Concat([]string{kind(events.KindResult), kvWrite(lease.Bucket),
			"$JS.ACK." + n.Stream + ".>", // acknowledging actions of its durable consumers
		}, read, readStream(leases)), Subscribe: sub}
	}
	panic("natsauth: unknown role " + string(role))
}
