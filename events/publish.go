package events

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// PublishOptions describe who publishes a desired state and why.
type PublishOptions struct {
	Cluster string // default DefaultCluster
	// Publisher names the service or user, for audit (header).
	Publisher string
	// CorrelationID links the change to what it causes; empty lets
	// converge derive one from the stream sequence.
	CorrelationID string
}

// PublishDesired validates a desired state and publishes it to its
// subject, returning the stream sequence (the desired revision). Invalid
// input is refused before anything is published.
func PublishDesired(ctx context.Context, js jetstream.JetStream, d *Desired, o PublishOptions) (uint64, error) {
	if o.Cluster == "" {
		o.Cluster = DefaultCluster
	}
	if err := ValidateCluster(o.Cluster); err != nil {
		return 0, err
	}
	body, err := json.Marshal(d)
	if err != nil {
		return 0, err
	}
	if _, err := DecodeDesired(body, d.VMID); err != nil {
		return 0, err
	}
	return PublishDesiredBody(ctx, js, d.VMID, body, o)
}

// PublishDesiredBody publishes an already validated body as is.
func PublishDesiredBody(ctx context.Context, js jetstream.JetStream, vmid int, body []byte, o PublishOptions) (uint64, error) {
	if o.Cluster == "" {
		o.Cluster = DefaultCluster
	}
	msg := &nats.Msg{Subject: Subject(KindDesired, o.Cluster, vmid), Data: body, Header: nats.Header{}}
	msg.Header.Set(HeaderSchema, "1")
	if o.Publisher != "" {
		msg.Header.Set(HeaderPublisher, o.Publisher)
	}
	if o.CorrelationID != "" {
		msg.Header.Set(HeaderCorrelationID, o.CorrelationID)
	}
	ack, err := js.PublishMsg(ctx, msg)
	if err != nil {
		return 0, fmt.Errorf("publish desired %d: %w", vmid, err)
	}
	return ack.Sequence, nil
}
