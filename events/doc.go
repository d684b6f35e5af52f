// Package events is converge's public event contract (docs/events.md): the
// desired, observed, action and result events, heartbeats and control
// requests, their JSON encoding, validation, NATS subjects and headers,
// the classes of failed actions ([ErrorClass]) and the normalisation of
// managed values ([NormaliseTags], [NormaliseDescription], [FormatTags],
// [FormatBool]). Other Go services import it to publish desired state.
//
// It imports no other converge package and no NATS client: [DesiredMessage]
// builds a validated [Message] (subject, [Header], body) that any client
// publishes with one call (see [Message]).
//
// # Subjects
//
// Events of one guest travel on pve.<kind>.<cluster>.<vmid> ([Subject]).
// The stream stores them as pve.<kind>.<cluster>.<vmid>.<partition>
// (a subject transform adds the partition, see internal/bus);
// [ParseSubject] reads both forms. The journal takes only these shapes
// (and pve.heartbeat.<cluster>, pve.control.<cluster>): a publish on any
// other pve. subject finds no stream and fails.
//
// # Guest agent addresses
//
// [Addresses] (pve.addresses.<cluster>.<vmid>, addresses.go) is what a
// QEMU guest's agent reports of its network addresses, published by the
// observer when the set changes ([NormaliseAddresses], [SameAddresses]).
// It is informational and journalled apart from [Observed] on purpose: it
// is never an action's basis, never fences an action and plans nothing.
//
// # Desired events
//
// A desired event states a guest's whole desired state and replaces the
// previous one; a field it omits is not managed. [DecodeDesired] validates
// a body against the JSON Schema shipped in desired.schema.json ([Schema])
// and against the subject's vmid, and returns a [*ValidationError] naming
// each problem's field. Before the schema runs, a body over
// [MaxDesiredBytes] (64 KiB) is refused unread, and a body with a key given
// twice (at any depth, vmid included), invalid UTF-8 (raw or as a lone
// surrogate escape) or more than one JSON value is refused: JSON readers
// disagree on such bodies (Go keeps a duplicate key's last value, others
// the first; Go replaces invalid UTF-8), so no reader may see another
// guest or value than converge did. A rejection keeps at most
// [MaxProblems] problems ("… and N more") and its reason at most
// [MaxReasonBytes], so a hostile body is cheap to refuse and to report.
// Invalid events stay in the stream (nothing is lost) and are reported as
// rejected; nothing is planned from them.
//
// Beyond the schema, a value Proxmox would refuse is rejected, the problem
// naming the field and Proxmox's format (pveformat.go): NIC addresses and
// mtu, ipconfigN, cicustom, nameserver, searchdomain, storage ids. A rule
// of one guest kind (a NIC's mtu) is checked against the kind the event
// states; an event that states none is held by the planner to the kind it
// observes ([Desired.CheckKind]).
//
// [Desired.Set] names the set a guest was published in (converge desire
// --set; [ValidSet]): bookkeeping for pruning a set, it manages nothing in
// Proxmox.
//
// Schema version, publisher identity and correlation id travel in headers
// ([HeaderSchema], [HeaderPublisher], [HeaderCorrelationID]) because the
// desired body admits only its documented fields; a rollback's desired
// event also says which revision it restores and which it replaces
// ([HeaderRollbackTo], [HeaderRollbackFrom]). Events converge writes
// itself carry the same facts in [Meta] in the body.
//
// # Decoding converge's own events
//
// Events are read and written with one JSON package,
// github.com/go-json-experiment/json (the prototype of encoding/json/v2),
// under option sets built once (codec.go). [Encode] writes the bytes
// encoding/json writes: the journal holds them. [Decode] reads the values
// encoding/json reads: unknown members are ignored (fields are only ever
// added, and an event of a newer converge never stops a fold), names match
// regardless of case, invalid UTF-8 reads as U+FFFD; a malformed body is
// refused at its first fault. Every string is copied out of the body, so a
// decoded value shares no memory with it (the planner keeps every guest's
// last events). [DecodeDesired] is strict instead: its fast path
// (fast.go) unmarshals with the package's defaults and unknown members
// refused, then checks the schema's constraints in Go; a body it does not
// take goes to the checks above and the schema, which decide and explain.
//
// # Compatibility
//
// Schema version 1. Fields are only ever added to converge's own events;
// consumers must ignore unknown fields in observed, action and result
// events. Desired events reject unknown fields so that typos never pass
// silently as "unmanaged".
//
// Signed desired events (sign.go, docs/signing.md): [SignMessage] sets the
// Converge-Key-Id, Converge-Signed-At and Converge-Signature headers, an
// ed25519 signature over [SignedBytes] (a domain tag, the published
// subject, the key id, the time, the publisher header and the exact body);
// [VerifySignature] checks them against trusted keys.
package events
