package events_test

import (
	"errors"
	"testing"

	"github.com/converge-pve/converge/events"
)

// TestDesiredMessage: invalid input yields no message; valid input yields
// the documented subject, the schema, publisher and correlation headers,
// and a body that decodes back to what was given. (internal/bus's
// TestPublishDesiredMessage publishes such messages and reads them back
// from the stream.)
func TestDesiredMessage(t *testing.T) {
	t.Run("invalid input is refused", func(t *testing.T) {
		cases := []struct {
			name string
			d    events.Desired
			o    events.PublishOptions
		}{
			{"vmid out of range", events.Desired{VMID: 42}, events.PublishOptions{}},
			{"cores 0", events.Desired{VMID: 101, Cores: ptr(0)}, events.PublishOptions{}},
			{"bad enum", events.Desired{VMID: 101, Power: ptr(events.Power("on"))}, events.PublishOptions{}},
			{"absent with power", events.Desired{VMID: 101, Absent: true, Power: ptr(events.PowerRunning)}, events.PublishOptions{}},
			{"clone from itself", events.Desired{VMID: 101, Clone: &events.Clone{From: 101}}, events.PublishOptions{}},
			{"cluster with a dot", events.Desired{VMID: 101}, events.PublishOptions{Cluster: "a.b"}},
			{"cluster with a wildcard", events.Desired{VMID: 101}, events.PublishOptions{Cluster: "*"}},
		}
		for _, c := range cases {
			m, err := events.DesiredMessage(&c.d, c.o)
			if err == nil || m.Subject != "" || m.Data != nil {
				t.Errorf("%s: DesiredMessage = %+v, %v; want an error and no message", c.name, m, err)
			}
			var ve *events.ValidationError
			if c.o.Cluster == "" && !errors.As(err, &ve) {
				t.Errorf("%s: error %v is not a *ValidationError", c.name, err)
			}
		}
		if m, err := events.DesiredBodyMessage(101, []byte(`{"vmid":101}`), events.PublishOptions{Cluster: "a.b"}); err == nil {
			t.Errorf("DesiredBodyMessage with cluster a.b = %+v, want an error", m)
		}
	})

	t.Run("valid input makes the message", func(t *testing.T) {
		cases := []struct {
			d                               events.Desired
			o                               events.PublishOptions
			subject, publisher, correlation string
		}{
			{events.Desired{VMID: 101, Power: ptr(events.PowerRunning), Cores: ptr(4)},
				events.PublishOptions{Publisher: "billing", CorrelationID: "order-7"}, "pve.desired.pve.101", "billing", "order-7"},
			{events.Desired{VMID: 202, Kind: ptr(events.LXC), Absent: true},
				events.PublishOptions{Cluster: "lab-2", Publisher: "ci"}, "pve.desired.lab-2.202", "ci", ""},
			{events.Desired{VMID: 999999999, Tags: ptr([]string{})}, events.PublishOptions{}, "pve.desired.pve.999999999", "", ""},
		}
		for _, c := range cases {
			m, err := events.DesiredMessage(&c.d, c.o)
			if err != nil {
				t.Fatalf("DesiredMessage(%d): %v", c.d.VMID, err)
			}
			if m.Subject != c.subject {
				t.Errorf("subject %q, want %q", m.Subject, c.subject)
			}
			if got := m.Header.Get(events.HeaderSchema); got != "1" {
				t.Errorf("%s = %q, want 1", events.HeaderSchema, got)
			}
			if got := m.Header.Get(events.HeaderPublisher); got != c.publisher {
				t.Errorf("%s = %q, want %q", events.HeaderPublisher, got, c.publisher)
			}
			if got := m.Header.Get(events.HeaderCorrelationID); got != c.correlation {
				t.Errorf("%s = %q, want %q", events.HeaderCorrelationID, got, c.correlation)
			}
			back, err := events.DecodeDesired(m.Data, c.d.VMID)
			if err != nil {
				t.Fatalf("body does not decode: %v", err)
			}
			if mustJSON(t, back) != mustJSON(t, c.d) {
				t.Errorf("body %s, given %s", m.Data, mustJSON(t, c.d))
			}
		}
	})
}
