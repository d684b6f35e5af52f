package bus

import (
	"github.com/nats-io/nats.go"

	"github.com/converge-pve/converge/events"
)

// Subscribe delivers the messages published on subject, live over core
// NATS on b's connection (no extra connection: control.Subscriber). A
// message that is also journalled keeps its reply subject for the
// publisher's acknowledgement: this copy never answers it.
func (b *Bus) Subscribe(subject string, fn func(events.Message)) (func() error, error) {
	sub, err := b.NC.Subscribe(subject, func(m *nats.Msg) {
		fn(events.Message{Subject: m.Subject, Header: events.Header(m.Header), Data: m.Data})
	})
	if err != nil {
		return nil, err
	}
	return sub.Unsubscribe, nil
}
