// Package natsauth is converge's one table of NATS identities: the roles
// (publisher, observer, planner, executor, api, notify, auditor, admin) and, for each,
// the subjects it may publish and subscribe to, JetStream API calls
// included. Everything else renders from it: the users of `converge up`'s
// embedded server ([Credentials.Users]), the nats-server configuration
// shipped in deploy/nats/users.conf ([UsersConfig]; a test keeps them
// equal), and the credentials `converge up` generates under its data
// directory ([LoadOrCreate]).
//
// Contract:
//   - a role publishes only its own event subjects: publisher
//     pve.desired.*.*; observer pve.observed.*.*, pve.addresses.*.* and
//     pve.heartbeat.*;
//     planner pve.action.*.* and the views, leases and checkpoint buckets;
//     executor pve.result.*.* and the leases bucket; resync requests
//     (pve.control.*) only admin;
//   - every role but admin reads the journal, its keep stream and the
//     views bucket through JetStream's read API alone (stream info, direct
//     and message gets, consumers and their pulls): it checks at start that
//     they exist as converge wants them; no role but admin creates,
//     updates, deletes or purges a stream or bucket, except the planner
//     purging its own checkpoints' old chunks (`converge provision`
//     creates them, as admin);
//   - the notifier (notify) writes only its own bucket (converge_notify,
//     which it may create), reads the leases bucket, and acknowledges the
//     messages of its routes' durable consumers on the views stream and
//     its bucket's stream; with Names.NotifyRoutes given, those consumers
//     are its alone;
//   - the auditor publishes nothing but requests to that read API;
//   - admin is unrestricted (provisioning, `converge resync`, `converge
//     rebuild`).
//
// The table depends on the resource names (stream, views bucket), so it
// renders for a [Names]; the shipped files use the defaults.
package natsauth
