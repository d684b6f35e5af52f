package events

import "time"

// SchemaVersion is the version of every event this package writes.
const SchemaVersion = 1

// Headers carried by events on the bus.
const (
	// HeaderSchema is the event's schema version ("1"); absent means 1.
	HeaderSchema = "Converge-Schema"
	// HeaderPublisher names who published a desired event (a service, a
	// user, "converge-cli"). Free text, for audit.
	HeaderPublisher = "Converge-Publisher"
	// HeaderCorrelationID links a desired change to the actions and
	// results it caused. Set by the publisher or derived from the desired
	// event's stream sequence.
	HeaderCorrelationID = "Converge-Correlation-Id"
	// HeaderRollbackTo marks a desired event published by `converge
	// rollback`: the desired revision (journal sequence) it restores. Who
	// asked is HeaderPublisher.
	HeaderRollbackTo = "Converge-Rollback-To"
	// HeaderRollbackFrom is, on a rollback, the desired revision in force
	// when it was asked for (absent when the guest had none).
	HeaderRollbackFrom = "Converge-Rollback-From"
)

// Meta is carried in the body of every event converge writes itself.
type Meta struct {
	Schema        int       `json:"schema"`
	Publisher     string    `json:"publisher"`
	CorrelationID string    `json:"correlation_id,omitempty"`
	Time          time.Time `json:"time"`
}

// NewMeta stamps an event.
func NewMeta(publisher, correlationID string, now time.Time) Meta {
	return Meta{Schema: SchemaVersion, Publisher: publisher, CorrelationID: correlationID, Time: now.UTC()}
}
