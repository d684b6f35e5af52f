package events_test

import (
	"strings"
	"testing"

	"github.com/converge-pve/converge/events"
)

func TestSubjects(t *testing.T) {
	cases := []struct{ got, want string }{
		{events.Subject(events.KindDesired, "pve", 101), "pve.desired.pve.101"},
		{events.Subject(events.KindObserved, "lab", 999999999), "pve.observed.lab.999999999"},
		{events.Subject(events.KindAction, "pve", 100), "pve.action.pve.100"},
		{events.Subject(events.KindResult, "c_1", 4242), "pve.result.c_1.4242"},
		{events.ClusterSubject(events.KindHeartbeat, "pve"), "pve.heartbeat.pve"},
		{events.ClusterSubject(events.KindControl, "lab"), "pve.control.lab"},
		{events.StoredFilter(events.KindDesired, "pve", 101), "pve.desired.pve.101.*"},
		{events.StoredFilter(events.KindResult, "lab", 7000), "pve.result.lab.7000.*"},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestParseSubject(t *testing.T) {
	valid := []struct {
		subject string
		want    events.SubjectInfo
	}{
		{"pve.desired.pve.101", events.SubjectInfo{Kind: events.KindDesired, Cluster: "pve", VMID: 101, Partition: -1}},
		{"pve.observed.lab.999999999", events.SubjectInfo{Kind: events.KindObserved, Cluster: "lab", VMID: 999999999, Partition: -1}},
		{"pve.action.pve.101.0", events.SubjectInfo{Kind: events.KindAction, Cluster: "pve", VMID: 101, Partition: 0}},
		{"pve.result.pve.101.15", events.SubjectInfo{Kind: events.KindResult, Cluster: "pve", VMID: 101, Partition: 15}},
		{"pve.desired.c-1.2000.1023", events.SubjectInfo{Kind: events.KindDesired, Cluster: "c-1", VMID: 2000, Partition: 1023}},
		{"pve.heartbeat.pve", events.SubjectInfo{Kind: events.KindHeartbeat, Cluster: "pve", Partition: -1}},
		{"pve.control.lab", events.SubjectInfo{Kind: events.KindControl, Cluster: "lab", Partition: -1}},
	}
	for _, c := range valid {
		got, err := events.ParseSubject(c.subject)
		if err != nil {
			t.Errorf("ParseSubject(%q): %v", c.subject, err)
			continue
		}
		if got != c.want {
			t.Errorf("ParseSubject(%q) = %+v, want %+v", c.subject, got, c.want)
		}
	}
	invalid := []struct{ subject, says string }{
		{"", "not a converge subject"},
		{"pve", "not a converge subject"},
		{"pve.desired", "not a converge subject"},
		{"x.desired.pve.1", "not a converge subject"},
		{"PVE.desired.pve.101", "not a converge subject"},
		{"pve.nope.pve.1", "unknown event kind"},
		{"pve.Desired.pve.101", "unknown event kind"},
		{"pve.desired.pve", "want pve.desired.<cluster>.<vmid>"},
		{"pve.desired.pve.abc", "not a decimal number"},
		{"pve.desired.pve.0101", "not a decimal number"},
		{"pve.desired.pve.+101", "not a decimal number"},
		{"pve.desired.pve.-101", "not a decimal number"},
		{"pve.desired.pve.", "not a decimal number"},
		{"pve.desired.pve.0", "not a decimal number within 100..999999999"},
		{"pve.observed.pve.99", "not a decimal number within 100..999999999"},
		{"pve.result.pve.1000000000", "not a decimal number within 100..999999999"},
		{"pve.desired.pve.101.x", "bad partition"},
		{"pve.desired.pve.101.-1", "bad partition"},
		{"pve.desired.pve.101.1.2", "want pve.desired.<cluster>.<vmid>"},
		{"pve.heartbeat.pve.101", "want pve.heartbeat.<cluster>"},
		{"pve.control.pve.1.2", "want pve.control.<cluster>"},
	}
	for _, c := range invalid {
		got, err := events.ParseSubject(c.subject)
		if err == nil {
			t.Errorf("ParseSubject(%q) = %+v, want an error", c.subject, got)
			continue
		}
		if !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), c.subject) {
			t.Errorf("ParseSubject(%q) error %q, want it to quote the subject and say %q", c.subject, err, c.says)
		}
		if got != (events.SubjectInfo{}) {
			t.Errorf("ParseSubject(%q) returned %+v with its error", c.subject, got)
		}
	}
}

// TestSubjectParseRoundTrip: what Subject builds, ParseSubject reads back.
func TestSubjectParseRoundTrip(t *testing.T) {
	for _, k := range []events.Kind{events.KindDesired, events.KindObserved, events.KindAction, events.KindResult} {
		for _, vmid := range []int{events.MinVMID, 101, 123456, events.MaxVMID} {
			s := events.Subject(k, "pve", vmid)
			got, err := events.ParseSubject(s)
			if err != nil || got != (events.SubjectInfo{Kind: k, Cluster: "pve", VMID: vmid, Partition: -1}) {
				t.Errorf("ParseSubject(%q) = %+v, %v", s, got, err)
			}
			stored := strings.Replace(events.StoredFilter(k, "pve", vmid), "*", "3", 1)
			if got, err := events.ParseSubject(stored); err != nil || got.Partition != 3 || got.VMID != vmid {
				t.Errorf("ParseSubject(%q) = %+v, %v", stored, got, err)
			}
		}
	}
}

func TestValidateCluster(t *testing.T) {
	for _, ok := range []string{"pve", "lab-2", "A_b-9", strings.Repeat("x", 64)} {
		if err := events.ValidateCluster(ok); err != nil {
			t.Errorf("ValidateCluster(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a.b", "*", ">", "a b", strings.Repeat("x", 65), "pvé"} {
		if err := events.ValidateCluster(bad); err == nil {
			t.Errorf("ValidateCluster(%q) accepted it", bad)
		}
	}
}
