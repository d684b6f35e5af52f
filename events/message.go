package events

// Message is an event ready to publish with any NATS client: its subject,
// headers and body. Publishing it is one call, for example with nats.go's
// jetstream package:
//
//	m, err := events.DesiredMessage(&d, events.PublishOptions{Publisher: "billing"})
//	...
//	ack, err := js.PublishMsg(ctx, &nats.Msg{Subject: m.Subject, Header: nats.Header(m.Header), Data: m.Data})
//
// ack.Sequence is then the desired revision.
type Message struct {
	Subject string
	Header  Header
	Data    []byte
}

// PublishOptions describe who publishes a desired state and why.
type PublishOptions struct {
	Cluster string // default DefaultCluster
	// Publisher names the service or user, for audit (header).
	Publisher string
	// CorrelationID links the change to what it causes; empty lets
	// converge derive one from the stream sequence.
	CorrelationID string
}

// DesiredMessage validates a desired state and returns the message that
// publishes it. Invalid input is refused (a *ValidationError, or an error
// naming a bad cluster) before any message exists.
func DesiredMessage(d *Desired, o PublishOptions) (Message, error) {
	if err := validOptions(&o); err != nil {
		return Message{}, err
	}
	body, err := Encode(d)
	if err != nil {
		return Message{}, err
	}
	if _, err := DecodeDesired(body, d.VMID); err != nil {
		return Message{}, err
	}
	return desiredMessage(d.VMID, body, o), nil
}

// DesiredBodyMessage wraps a body already validated with DecodeDesired
// (for vmid) as is.
func DesiredBodyMessage(vmid int, body []byte, o PublishOptions) (Message, error) {
	if err := validOptions(&o); err != nil {
		return Message{}, err
	}
	return desiredMessage(vmid, body, o), nil
}

func validOptions(o *PublishOptions) error {
	if o.Cluster == "" {
		o.Cluster = DefaultCluster
	}
	return ValidateCluster(o.Cluster)
}

func desiredMessage(vmid int, body []byte, o PublishOptions) Message {
	m := Message{Subject: Subject(KindDesired, o.Cluster, vmid), Data: body, Header: Header{}}
	m.Header.Set(HeaderSchema, "1")
	if o.Publisher != "" {
		m.Header.Set(HeaderPublisher, o.Publisher)
	}
	if o.CorrelationID != "" {
		m.Header.Set(HeaderCorrelationID, o.CorrelationID)
	}
	return m
}
