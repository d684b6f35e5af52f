package natsauth

import (
	"fmt"
	"slices"
	"strings"

	"github.com/converge-pve/converge/events"
	"github.com/converge-pve/converge/internal/bus"
	"github.com/converge-pve/converge/internal/journal"
	"github.com/converge-pve/converge/internal/lease"
	"github.com/converge-pve/converge/internal/notify"
)

// Role is a NATS identity of converge; its user name is the role's name.
type Role string

// The roles, each a NATS user of that name.
const (
	Publisher Role = "publisher" // publishes desired state; reads views and the journal to see it applied
	Observer  Role = "observer"
	Planner   Role = "planner"
	Executor  Role = "executor"
	// API is the process serving the HTTP API's /v1 (`converge api`):
	// desired state and operators' requests, nothing more.
	API Role = "api"
	// Notify is the notifier (`converge notify`): it reads the views and
	// leases, owns its bucket and its routes' durable consumers, and posts
	// to webhooks.
	Notify  Role = "notify"
	Auditor Role = "auditor" // reads only
	Admin   Role = "admin"   // everything: provisioning, resync, rebuild
)

// Roles are all roles, in the order files list them. A role added later
// (a notifier with a durable consumer of its own, whoever publishes the
// releases of a pruned set) is a line here, its case in For and, if it
// owns durable consumers, in owned.
var Roles = []Role{Publisher, Observer, Planner, Executor, API, Notify, Auditor, Admin}

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
	// Clusters are the Proxmox clusters whose durable consumers the table
	// protects (default the default cluster), Partitions the journal's
	// partition count (default bus.DefaultPartitions): NATS matches
	// consumer names whole, so each is named.
	Clusters   []string
	Partitions int
	// NotifyRoutes are the notifier's routes, whose durable consumers
	// (notify.Consumer, one per cluster of Clusters and route) only the
	// notify user may touch; none by default
	// (the shipped files): the notifier still works, its consumers are
	// then not protected from the other roles' read API.
	NotifyRoutes []string
}

// DefaultNames are the resources of a default installation.
var DefaultNames = Names{Stream: bus.DefaultStream, Bucket: bus.DefaultBucket,
	Clusters: []string{events.DefaultCluster}, Partitions: bus.DefaultPartitions}

func (n Names) orDefault() Names {
	if n.Stream == "" {
		n.Stream = DefaultNames.Stream
	}
	if n.Bucket == "" {
		n.Bucket = DefaultNames.Bucket
	}
	if len(n.Clusters) == 0 {
		n.Clusters = DefaultNames.Clusters
	}
	if n.Partitions == 0 {
		n.Partitions = DefaultNames.Partitions
	}
	return n
}

// Perms are what a role may publish and subscribe to, and the publishes
// it may not make although its allows match them; nil Publish and
// Subscribe mean everything (admin).
type Perms struct {
	Publish, Subscribe []string
	DenyPublish        []string
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

// owned are the durable consumers role owns, as <stream>.<consumer>: only
// it may create, update, delete, pause or pull from them.
func owned(role Role, n Names) []string {
	var out []string
	switch role {
	case Executor:
		for _, c := range n.Clusters {
			for p := range n.Partitions {
				out = append(out, n.Stream+"."+journal.PartitionConsumer(journal.ExecutorGroup(c), p))
			}
		}
	case Notify:
		for _, c := range n.Clusters {
			for _, r := range n.NotifyRoutes {
				out = append(out, "KV_"+n.Bucket+"."+notify.Consumer(c, r), "KV_"+notify.Bucket+"."+notify.Consumer(c, r))
			}
		}
	}
	return out
}

// othersConsumers are the JetStream API requests on the durable consumers
// other roles own: every role's read API (ephemeral consumers, their pulls
// and deletion) would match them otherwise.
func othersConsumers(role Role, n Names) []string {
	var out []string
	api := "$JS.API.CONSUMER."
	for _, other := range Roles {
		if other == role {
			continue
		}
		for _, s := range owned(other, n) {
			out = append(out, api+"CREATE."+s, api+"CREATE."+s+".>", api+"DURABLE.CREATE."+s, api+"DELETE."+s,
				api+"PAUSE."+s, api+"MSG.NEXT."+s)
		}
	}
	return out
}

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
	deny := othersConsumers(role, n)
	switch role {
	case Admin:
		return Perms{}
	case Publisher:
		return Perms{Publish: slices.Concat([]string{kind(events.KindDesired)}, read), Subscribe: sub, DenyPublish: deny}
	case API:
		return Perms{Publish: slices.Concat([]string{kind(events.KindDesired), clusterKind(events.KindControl)}, read),
			Subscribe: sub, DenyPublish: deny}
	case Auditor:
		return Perms{Publish: read, Subscribe: sub, DenyPublish: deny}
	case Notify:
		own := "KV_" + notify.Bucket
		return Perms{Publish: slices.Concat([]string{kvWrite(notify.Bucket), "$JS.API.STREAM.CREATE." + own,
			// acknowledging its durable consumers' messages
			"$JS.ACK." + views + ".>", "$JS.ACK." + own + ".>"},
			read, readStream(leases), readStream(own)), Subscribe: sub, DenyPublish: deny}
	case Observer:
		return Perms{Publish: slices.Concat([]string{kind(events.KindObserved), kind(events.KindAddresses), clusterKind(events.KindHeartbeat)}, read),
			Subscribe: sub, DenyPublish: deny}
	case Planner:
		return Perms{Publish: slices.Concat([]string{kind(events.KindAction), kvWrite(n.Bucket), kvWrite(lease.Bucket),
			kvWrite(bus.LimitsBucket), "$O." + bus.CheckpointBucket + ".>", "$JS.API.STREAM.PURGE." + ckpts},
			read, readStream(leases), readStream(ckpts), readStream(limits)), Subscribe: sub, DenyPublish: deny}
	case Executor:
		return Perms{Publish: slices.Concat([]string{kind(events.KindResult), kvWrite(lease.Bucket),
			"$JS.ACK." + n.Stream + ".>", // acknowledging actions of its durable consumers
		}, read, readStream(leases)), Subscribe: sub, DenyPublish: deny}
	}
	panic("natsauth: unknown role " + string(role))
}

// ProbeSubject is where role's readiness probe publishes (and is refused
// by its fence, storing nothing): a subject the role may publish, of no
// guest (vmid 0). "" for a role that publishes nothing (auditor).
func ProbeSubject(role Role, cluster string) string {
	var k events.Kind
	switch role {
	case Observer, Admin:
		return events.ClusterSubject(events.KindHeartbeat, cluster)
	case Publisher, API:
		k = events.KindDesired
	case Planner:
		k = events.KindAction
	case Executor:
		k = events.KindResult
	default:
		return ""
	}
	return events.ClusterSubject(k, cluster) + ".0"
}
